"""The plugin's NoneBot config (read with `get_plugin_config`, from the NoneBot app's .env or its
``nonebot.init`` arguments).

Inside someone else's NoneBot app these name her settings; everything else is yuiju's own config:
the TOML file named here, then ``YUIJU_<SECTION>__<FIELD>`` lines of the same .env (e.g.
``YUIJU_LLM__API_KEY=sk-...``), then the process environment. `yuiju run` / `yuiju bot` pass
their config directly and ignore these two fields but ``yuiju_chat_enabled``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Config(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    yuiju_config: str | None = None
    """Path of her yuiju.toml (``YUIJU_CONFIG=yuiju.toml`` in the .env), relative to where the bot
    runs. Empty: ./yuiju.toml when it exists, else the defaults and YUIJU_* settings alone."""
    yuiju_chat_enabled: bool = True
    """False: the plugin loads but starts nothing, records and answers nothing."""
