"""Scripted chat models for caller tests: langchain's fake model, plus tool binding."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool


class ToolFake(FakeMessagesListChatModel):
    """Replies with `responses` in turn; can raise `error`; its first call can wait on `release`."""

    error: Exception | None = None
    invocations: int = 0
    entered: threading.Event | None = None
    release: threading.Event | None = None

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.invocations += 1
        if self.invocations == 1 and self.entered is not None and self.release is not None:
            self.entered.set()
            assert self.release.wait(timeout=30), "the test never released the model"
        if self.error is not None:
            raise self.error
        return super()._generate(messages, stop, run_manager, **kwargs)


def tool_reply(name: str, args: dict[str, Any], usage: tuple[int, int] | None) -> AIMessage:
    """An AIMessage calling tool `name`, with usage (input, output) or none reported."""
    message = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call-1"}])
    if usage is not None:
        message.usage_metadata = UsageMetadata(
            input_tokens=usage[0], output_tokens=usage[1], total_tokens=sum(usage)
        )
    return message
