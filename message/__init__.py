"""The message side: 悠酱 in QQ groups and private chats, as a nonebot2 plugin over OneBot v11.

The matchers (``message.matchers``) are thin: they normalise an event and hand it to the plain
Python `message.service.ChatService`. Importing this package without an initialised nonebot
(tests, the benchmark) registers nothing.
"""

from nonebot.plugin import PluginMetadata

from message.config import Config

__plugin_meta__ = PluginMetadata(
    name="yuiju-chat",
    description="悠酱在 QQ 群和私聊里聊天：按她的生活记录回答，不编造。",
    usage="@她、叫她的名字或回复她的消息；管理员：/status /weather /give /pause /resume /distill /clear /proactive",
    type="application",
    config=Config,
    supported_adapters={"~onebot.v11"},
)


def _nonebot_ready() -> bool:
    try:
        import nonebot

        nonebot.get_driver()
    except ValueError:
        return False
    return True


if _nonebot_ready():  # loaded as a plugin; otherwise a plain library (tests, bench)
    from message import matchers as matchers
