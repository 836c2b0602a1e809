"""The plugin's nonebot config (read with `get_plugin_config`, from nonebot's env/.env)."""

from __future__ import annotations

from pydantic import BaseModel


class Config(BaseModel):
    yuiju_config: str | None = None
    """Path of yuiju.toml for `nb run`-style starts; `yuiju bot` passes its config directly."""
    yuiju_chat_enabled: bool = True
    """False: the plugin loads but records and answers nothing."""
