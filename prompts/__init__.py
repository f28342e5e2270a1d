"""Versioned prompt templates, `prompts/<stage>/v<N>.j2`, loaded by name (`extract/v1`); the
name is recorded with each extraction and each write a prompt produced.

A template's top-level blocks are its chat messages, in order: `{% block system %}` becomes
the system message, `{% block user %}` the user message. Templates render in Jinja's sandbox
with strict undefined variables, so a missing variable is an error, never an empty string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import FileSystemLoader, StrictUndefined, Template, TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

_ROOT = Path(__file__).parent
_NAME = re.compile(r"^[a-z][a-z0-9_]*/v[1-9][0-9]*$")
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Prompt:
    name: str
    template: Template

    def render(self, **variables: Any) -> list[dict[str, str]]:
        """The chat messages, one per top-level block, whitespace at their ends trimmed."""
        return [
            {"role": role, "content": self.render_block(role, **variables)}
            for role in self.template.blocks
        ]

    @property
    def roles(self) -> list[str]:
        """The messages' roles, in order."""
        return list(self.template.blocks)

    def render_block(self, role: str, **variables: Any) -> str:
        """One message's text (a caller may render a block that never changes only once)."""
        context = self.template.new_context(variables)
        return "".join(self.template.blocks[role](context)).strip()


@cache
def _environment() -> SandboxedEnvironment:
    return SandboxedEnvironment(
        loader=FileSystemLoader(_ROOT),
        undefined=StrictUndefined,
        autoescape=False,  # chat text, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


@cache
def load(name: str) -> Prompt:
    """The template `name` (`stage/vN`); ValueError when there is none."""
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a prompt name such as extract/v1")
    try:
        template = _environment().get_template(f"{name}.j2")
    except TemplateNotFound:
        raise ValueError(f"no prompt {name!r} under {_ROOT}") from None
    unknown = set(template.blocks) - set(ROLES)
    if not template.blocks or unknown:
        raise ValueError(f"prompt {name!r} needs blocks named {', '.join(ROLES)} only")
    return Prompt(name, template)


def names() -> list[str]:
    """Every prompt shipped, e.g. ['extract/v1']."""
    return sorted(
        f"{path.parent.name}/{path.stem}" for path in _ROOT.glob("*/v*.j2") if path.is_file()
    )
