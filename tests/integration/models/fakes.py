"""Scripted chat models for caller tests: langchain's fake model, plus tool binding."""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatResult

from tests.fakes.chat import ToolBindingFake


class ToolFake(ToolBindingFake):
    """Replies with `responses` in turn; can raise `error`; its first call can wait on `release`."""

    error: Exception | None = None
    invocations: int = 0
    entered: threading.Event | None = None
    release: threading.Event | None = None

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
