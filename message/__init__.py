"""The message side: 悠酱 in group and private chats, and her proactive posts.

The chat core (`service`, `agent`, `gate`, `context`, `output`, `grounding`, `recorder`,
`proactive`) is plain Python; the NoneBot plugin ``nonebot_plugin_yuiju`` is the thin entry that
hands it normalised messages.
"""
