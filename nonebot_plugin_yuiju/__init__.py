"""悠酱 as a NoneBot2 plugin: the thin entry (store name ``nonebot_plugin_yuiju``) over her chat side.

The plugin is her NoneBot edge: it maps an adapter's events to the core's platform-neutral
`yuiju.message.model.Entry` (``onebot`` for OneBot v11; ``uni`` with ``platforms`` for Satori,
Telegram and Feishu/Lark), hands them to the plain Python
`yuiju.message.service.ChatService` (``matchers``), and sends her lines through
nonebot-plugin-alconna's UniMessage (``send``). Loaded into someone else's NoneBot app (``nb run`` with
``nonebot_plugin_yuiju`` in ``[tool.nonebot] plugins``, or ``nonebot.load_plugin("nonebot_plugin_yuiju")``),
the plugin starts her chat and proactive posts with the app, from the plugin config
(`nonebot_plugin_yuiju.config`).
"""

from nonebot.plugin import PluginMetadata

from nonebot_plugin_yuiju.config import Config

HOMEPAGE = "https://github.com/yuiju-project/yuiju"
"""The project's home (pyproject's [project.urls] Homepage, which a test keeps equal): the NoneBot
plugin store requires one that answers."""

SUPPORTED_ADAPTERS = {"~onebot.v11", "~satori", "~telegram", "~feishu"}
"""The adapters she chats through, each proven end to end (tests/test_platforms_e2e.py). Named
one by one rather than inherited from nonebot-plugin-alconna, which sends to many more: incoming
messages need an edge per adapter (`nonebot_plugin_yuiju.platforms`)."""


__plugin_meta__ = PluginMetadata(
    name="悠酱 yuiju",
    description="悠酱在 QQ、Telegram、飞书的群和私聊里聊天，也会主动分享她在羽浦町的生活：回答都来自她真实的生活记录、日记和记忆，不编造。",
    usage=(
        "在群里 @她、叫她的名字或回复她的消息（群需在 [chat.groups] 里开启）；白名单里的人可以私聊。\n"
        "管理员：/status /weather /give /pause /resume /distill /clear /proactive /tools "
        "/link /unlink（同一个人的不同平台账号，如 /link qq:123 tg:456）\n"
        "配置：.env 里的 YUIJU_CONFIG=yuiju.toml（`yuiju init` 生成）与 YUIJU_<SECTION>__<FIELD>；"
        "她的生活由 `yuiju world` 驱动。"
    ),
    type="application",
    homepage=HOMEPAGE,
    config=Config,
    supported_adapters=SUPPORTED_ADAPTERS,
)


def _nonebot_ready() -> bool:
    try:
        import nonebot

        nonebot.get_driver()
    except ValueError:
        return False
    return True


if _nonebot_ready():  # importing it without an initialised nonebot registers nothing
    import nonebot

    nonebot.require("nonebot_plugin_alconna")  # the universal message her lines are sent as

    # the matchers' start-up hook builds the plugin's runtime (`runtime.start`)
    from nonebot_plugin_yuiju import matchers as matchers
    from nonebot_plugin_yuiju import retractions as retractions
