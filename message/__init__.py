"""The message side: 悠酱 in QQ groups and private chats, as a nonebot2 plugin over OneBot v11.

The matchers (``message.matchers``) are thin: they normalise an event and hand it to the plain
Python `message.service.ChatService`. Importing this package without an initialised nonebot
(tests, the benchmark) registers nothing.
"""
