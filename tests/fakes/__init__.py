"""Fake chat platforms on loopback that speak each platform's real protocol, for end-to-end tests
of a NoneBot app over its real adapter: events in, API calls out, nothing beyond 127.0.0.1.

| fake           | adapter (unpatched)        | events reach the bot                      | the bot calls   |
|----------------|----------------------------|-------------------------------------------|-----------------|
| `SatoriFake`   | nonebot-adapter-satori     | WebSocket /v1/events (IDENTIFY, READY,     | POST /v1/x.y    |
|                |                            | EVENT, PING/PONG, resume by sn)           |                 |
| `TelegramFake` | nonebot-adapter-telegram   | getUpdates long poll, offset confirms     | /bot<token>/... |
| `FeishuFake`   | nonebot-adapter-feishu     | encrypted, signed callbacks POSTed to the | /open-apis/...  |
|                |                            | app's webhook /feishu/<app_id>            |                 |
| `OneBotFake`   | nonebot-adapter-onebot v11 | the app's reverse WebSocket, dialled by   | on the same     |
|                |                            | the fake with its token                   | socket          |

Every fake has the same surface:

    async with SatoriFake() as fake, NoneBotApp(tmp_path, fake, plugin_source) as app:
        await fake.wait_connected()                     # the adapter is up and listening
        mid = await fake.send_group_message("在吗", mention_bot=True)
        await fake.send_group_message("你呢", reply_to=mid, image=True)
        await fake.send_private_message("你好", user=Person("30003", "小红"))
        calls = await fake.calls_until_quiet(1.0, first_within=10)   # list[ApiCall], unread ones
        sent = [c.sent for c in calls if c.sent]                      # list[Sent]
        await fake.send_bad_frame("truncated")          # or any other BadFrame

- `fake.nonebot_config()` is what `nonebot.init` needs to reach the fake (NoneBotApp passes it);
  `fake.adapter` names the adapter module; `fake.DEFAULT_USER` writes unless `user=` says.
- `ApiCall(name, params, files, sent)`: every call the bot made, decoded the way the platform
  types it; `sent` is the message it sent, if any: `Sent(chat, text, message_id, reply_to,
  mentions, media)` — the same fields on every platform, so one assertion fits all.
- `fake.calls.all` keeps every call; `calls_until_quiet` hands out the unread ones once the bot
  has been quiet for `quiet` s (waiting up to `first_within` s for the first); `sent_until_quiet`
  does the same for `Sent`; `fake.calls.wait_for(match, within)` waits for one call.
- Each fake answers like the real service (ids, stored messages for quotes and replies, errors
  with the platform's status and body), so an app that checks answers is tested too.
- What the real adapter does with each bad frame is in each fake's module docstring and proven
  in tests/test_fakes_<platform>.py; "never crashes" means the next message still gets its answer.

Adding a platform: copy the fake whose transport matches (a WebSocket the app dials: satori.py;
polling: telegram.py; webhooks into the app: feishu.py), keep FakePlatform's surface, and prove
it against the real adapter with `echo_plugin` the way tests/test_fakes_satori.py does.
"""

from tests.fakes._base import (
    BAD_FRAMES,
    EDGE_FRAMES,
    ELEMENTS_TEXT,
    ApiCall,
    BadFrame,
    CallLog,
    FakePlatform,
    Person,
    Sent,
    deep_json,
)
from tests.fakes.app import NoneBotApp, echo_plugin, free_port
from tests.fakes.feishu import FeishuFake
from tests.fakes.onebot import OneBotFake
from tests.fakes.satori import SatoriFake
from tests.fakes.telegram import TelegramFake

__all__ = [
    "BAD_FRAMES",
    "EDGE_FRAMES",
    "ELEMENTS_TEXT",
    "ApiCall",
    "BadFrame",
    "CallLog",
    "FakePlatform",
    "FeishuFake",
    "NoneBotApp",
    "OneBotFake",
    "Person",
    "SatoriFake",
    "Sent",
    "TelegramFake",
    "deep_json",
    "echo_plugin",
    "free_port",
]
