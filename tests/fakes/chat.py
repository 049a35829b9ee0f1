"""langchain-core's scripted chat model, taught to bind tools.

`with_structured_output(schema)` binds the schema as a tool; the stock fake
model cannot, so every scripted model in the tests starts from this one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

__all__ = ["ToolBindingFake"]


class ToolBindingFake(FakeMessagesListChatModel):
    """Replies with its scripted messages; bound tools arrive in `_generate`'s kwargs."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)
