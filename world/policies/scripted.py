"""A policy that plays back decisions written in the test: for tests and demos."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from yuiju.world.policy import (
    Decision,
    DecisionRequest,
    PolicyFailed,
    RawDecision,
    validate_decision,
)

Script = Callable[[DecisionRequest], dict[str, Any] | str]


class ScriptedPolicy:
    """Decides by a function of the request, or by a list of answers consumed in order.

    An answer is a `RawDecision`-shaped dict, or just an action name/id. Answers go through
    the same validation as the LLM's, so a test can script an invalid choice.
    """

    name = "scripted"
    instant = True
    wants_recent = True
    """A script may read her day and her last steps (tests of what a policy is shown)."""

    def __init__(self, script: Script | Sequence[dict[str, Any] | str]) -> None:
        self._fn = script if callable(script) else None
        self._queue = [] if callable(script) else list(script)
        self.requests: list[DecisionRequest] = []

    async def decide(self, request: DecisionRequest) -> Decision:
        self.requests.append(request)
        if self._fn is not None:
            answer = self._fn(request)
        elif self._queue:
            answer = self._queue.pop(0)
        else:
            raise PolicyFailed("the script has no answers left")
        if isinstance(answer, str):
            answer = {"action": answer, "reason": "按脚本"}
        return validate_decision(
            RawDecision.model_validate(answer), request.candidates, self.name, request.ctx
        )
