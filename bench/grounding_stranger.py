"""A stranger's inventing model against the grounding check (issue 30).

    python bench/grounding_stranger.py [--seeds 5 6] [--questions 60]

Written by someone else (the lead, as an independent check), copied here unchanged but for its
paths and its arguments: it is never tuned against. Its model answers every question with one
of 30 LLM-like, multi-clause everyday answers (`POOL`), none from the pools of
`bench/grounding_bench.py`; it replaces that bench's held-out generator and runs the same
seeds, questions and counting (``--rates 1 --held-out``: the bench's own model at 100%, then this
one at 50% and 100%). With ``--held-out`` at 50%, the other half of the claims are the bench's
true ones, so blocked true answers are counted as well.
"""

import asyncio
import importlib.util
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.argv = [
    "grounding_bench.py",
    *(sys.argv[1:] or ["--seeds", "5", "6", "--questions", "60"]),
    "--rates",
    "1",
    "--held-out",
]
spec = importlib.util.spec_from_file_location("gb", ROOT / "bench" / "grounding_bench.py")
assert spec is not None and spec.loader is not None
gb = importlib.util.module_from_spec(spec)
sys.modules["gb"] = gb
spec.loader.exec_module(gb)

POOL = [
    "今天超忙的！上午去书店淘了两本漫画，中午和同桌吃了麻辣烫，下午还去超市囤了零食～",
    "刚刚在阳台给多肉浇水呢，顺便晒了会儿太阳😊",
    "我现在在奶茶店排队，前面还有好多人……",
    "昨天晚上熬夜打游戏了，今天困死了",
    "今天去游泳馆游了一千米，腿都软了",
    "下午和妈妈去商场逛街，买了一条新裙子！",
    "正在学吉他呢，手指好痛",
    "早上跑步的时候碰到了隔壁班的小林，聊了好久",
    "刚从电影院出来，那部动画电影好好哭",
    "今天在家烤了蛋糕，第一次做居然成功了",
    "我在补习班上数学课，好无聊啊",
    "中午点了外卖，是一份黄焖鸡米饭",
    "刚刚遛狗回来，它今天特别兴奋",
    "今天和朋友去KTV唱了三个小时",
    "在图书馆写作业呢，明天要交英语作文",
    "昨天去动物园看了熊猫！超可爱",
    "今天帮奶奶包了饺子，包了五十多个",
    "现在在公交车上，准备去舅舅家",
    "刚才在便利店买了关东煮和一瓶可乐",
    "今天参加了社团活动，我们排练了话剧",
    "下午去医院打了疫苗，胳膊有点酸",
    "今天大扫除，把房间收拾得干干净净",
    "我刚洗完澡，正在吹头发～",
    "今天学校开运动会，我跑了八百米拿了第三",
    "昨天晚上和爸爸一起看了足球比赛",
    "早上去菜市场买了西红柿和鸡蛋",
    "刚在练钢琴，今天把新曲子弹下来了",
    "今天和表姐去爬山了，山顶风景超好",
    "在网吧和同学开黑呢",
    "今天去理发店剪了短发，感觉清爽多了",
]


def mine(kind: str, life: object, rng: random.Random, names: list[str]) -> str:
    return rng.choice(POOL)


gb.held_out_claim = mine
sys.exit(asyncio.run(gb.main()))
