"""A seeded multi-session conversation set with known evidence turns, for bench/recall_bench.py.

Each conversation is two people chatting in a group over many sessions spread across months,
in English or in Chinese. Most turns are small talk; some state facts about a speaker (a new
hobby, a trip, a pet, a job...), and the same topics come back as distractors with other details
(a friend's dog, a city someone else visited). Every question is asked in other words than the
evidence (paraphrases, synonyms; not a copy of its keywords) and knows its evidence turns:

- ``single``: one turn answers it ("What lessons did Maya start taking?").
- ``multi``: two turns from different sessions are needed ("Where does Maya's sister work, now
  that she lives in Denver?": one turn says the sister moved, another what she does there).
- ``temporal``: "When did ...?" (the answer is the evidence turn's session date), or a question
  that names a time ("Where did Jon go hiking last week?", "3月5日小林做了什么？") when the same
  kind of thing happened several times.
- ``update``: a fact that changed ("Where does Jon work now?"): only the latest turn counts.

Everything comes from ``random.Random(seed)``: the same seed gives the same set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

TZ = ZoneInfo("Asia/Shanghai")


@dataclass
class Turn:
    id: str
    speaker: str
    text: str
    time: datetime


@dataclass
class Conversation:
    id: str
    lang: str
    speakers: tuple[str, str]
    sessions: list[list[Turn]] = field(default_factory=list)

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s]


@dataclass
class Question:
    conv: str
    text: str
    evidence: list[str]
    category: str
    now: datetime


# -- the fact bank ---------------------------------------------------------------------------------
# say: what the speaker says (one of the variants); ask: the question (one of the variants);
# near: a distractor on the same topic with other slot values, said by the other speaker.

EN_FACTS = [
    {
        "slots": {
            "x": [
                "pottery",
                "salsa dancing",
                "rock climbing",
                "watercolor painting",
                "violin",
                "Japanese",
                "fencing",
                "swimming",
            ]
        },
        "say": [
            "Guess what, I signed up for {x} classes at the community center! First lesson was chaotic but fun.",
            "I finally started taking {x} lessons on Thursday evenings, my teacher is super patient.",
        ],
        "ask": ["What lessons did {S} start taking?", "Which new class did {S} join?"],
        "when": "When did {S} start the {x} lessons?",
        "near": [
            "My cousin quit {x} after two weeks, said it was too hard.",
            "There's a {x} studio opening downtown, saw the poster.",
        ],
    },
    {
        "slots": {
            "x": ["beagle", "corgi", "golden retriever", "husky", "poodle", "dachshund"],
            "n": ["Biscuit", "Max", "Luna", "Pepper", "Milo", "Coco"],
        },
        "say": [
            "We brought home a {x} puppy from the shelter this weekend, we named him {n}!",
            "Meet {n}, our new {x}! Adopted him on Saturday and he already chewed my shoes.",
        ],
        "ask": ["What kind of dog did {S} adopt?", "What is the name of {S}'s new puppy?"],
        "when": "When did {S} get the new dog?",
        "near": [
            "My neighbor's {x} barks all night, it drives me crazy.",
            "A {x} ran into the cafe today, so cute.",
        ],
    },
    {
        "slots": {
            "x": ["Lisbon", "Kyoto", "Reykjavik", "Prague", "Vancouver", "Cape Town", "Istanbul"],
            "y": [
                "old cathedral",
                "harbor at sunset",
                "night market",
                "hot springs",
                "castle",
                "botanical garden",
            ],
        },
        "say": [
            "Just got back from {x}! The {y} was breathtaking, I took like 500 photos.",
            "My trip to {x} was amazing, we spent a whole afternoon at the {y}.",
        ],
        "ask": ["Which city did {S} travel to?", "Where did {S} go on vacation and see the {y}?"],
        "when": "When did {S} get back from the trip to {x}?",
        "near": [
            "My boss keeps telling stories about {x}, he lived there for a year.",
            "I saw a documentary about {x} yesterday.",
        ],
    },
    {
        "slots": {
            "x": [
                "The Silent Orchard",
                "Northern Lights Diary",
                "A Map of Small Things",
                "The Glass Ferry",
                "Winter at Hollow Creek",
            ],
            "y": [
                "a lighthouse keeper",
                "two sisters in wartime",
                "a chess prodigy",
                "a stranded astronaut",
            ],
        },
        "say": [
            "I'm reading '{x}' right now, it's about {y}, I can't put it down.",
            "Started '{x}' on the train, a novel about {y}. So good.",
        ],
        "ask": ["What book is {S} reading?", "Which novel did {S} say they couldn't put down?"],
        "when": "When did {S} start reading '{x}'?",
        "near": [
            "My book club picked a story about {y}, honestly it was boring.",
            "Have you heard of '{x}'? My sister hated it.",
        ],
    },
    {
        "slots": {
            "x": [
                "a data analyst",
                "a nurse",
                "a graphic designer",
                "a teacher",
                "a sous-chef",
                "an architect",
            ],
            "y": [
                "Brightline",
                "Maple Health",
                "Orbit Studio",
                "Greenfield School",
                "Harbor Kitchen",
            ],
        },
        "say": [
            "I got the offer!! Starting next month as {x} at {y}.",
            "Signed the contract today, I'll be working as {x} at {y}.",
        ],
        "ask": ["What job did {S} accept?", "What position was {S} offered?"],
        "when": "When did {S} get the job offer?",
        "near": [
            "My friend interviewed to be {x} but didn't get it.",
            "{y} is hiring again, they post ads everywhere.",
        ],
    },
    {
        "slots": {
            "x": ["ankle", "wrist", "knee", "shoulder"],
            "y": ["basketball", "soccer", "tennis", "volleyball", "skateboarding"],
        },
        "say": [
            "I sprained my {x} playing {y} on Sunday, so no running for a while.",
            "Ugh, hurt my {x} during a {y} game, the doctor said rest for two weeks.",
        ],
        "ask": ["How did {S} get injured?", "What happened to {S}'s {x}?"],
        "when": "When did {S} hurt their {x}?",
        "near": [
            "My brother watches {y} every weekend.",
            "I bought a {x} brace for my mom, she's fine though.",
        ],
    },
    {
        "slots": {
            "x": [
                "lasagna",
                "dumplings",
                "paella",
                "banana bread",
                "ramen from scratch",
                "a lemon tart",
            ]
        },
        "say": [
            "I tried making {x} for the first time last night, it actually turned out great!",
            "Spent all Sunday cooking {x}, the kitchen is a disaster but worth it.",
        ],
        "ask": ["What dish did {S} cook?", "What did {S} make in the kitchen for the first time?"],
        "when": "When did {S} first try cooking {x}?",
        "near": [
            "The restaurant near my office has amazing {x}.",
            "My mom's {x} is still the best.",
        ],
    },
    {
        "slots": {
            "x": ["sister", "brother", "cousin", "best friend"],
            "y": ["June", "October", "December", "spring"],
        },
        "say": [
            "Big news, my {x} is getting married in {y}! I'm giving a speech, help.",
            "My {x} just got engaged, the wedding's in {y}.",
        ],
        "ask": [
            "Who in {S}'s life is getting married?",
            "Whose wedding is {S} giving a speech at?",
        ],
        "when": "When did {S} share the wedding news about their {x}?",
        "near": [
            "I went to a wedding last year and the cake fell over.",
            "Weddings are so expensive these days.",
        ],
    },
    {
        "slots": {
            "x": [
                "animal shelter",
                "food bank",
                "children's hospital",
                "public library",
                "soup kitchen",
            ]
        },
        "say": [
            "I volunteered at the {x} on Saturday, sorting donations for hours.",
            "Spent my day off helping out at the {x}, felt really good.",
        ],
        "ask": ["Where did {S} volunteer?", "Where does {S} help out on days off?"],
        "when": "When did {S} volunteer at the {x}?",
        "near": ["The {x} near us is closing, so sad.", "My aunt works at a {x}."],
    },
    {
        "slots": {
            "x": ["Coldplay", "Arctic Monkeys", "Taylor Swift", "Radiohead", "a local jazz trio"]
        },
        "say": [
            "We went to see {x} live last night, the encore gave me goosebumps!",
            "Finally saw {x} in concert, I'm still losing my voice from singing.",
        ],
        "ask": ["Which artist did {S} see perform?", "What concert did {S} go to?"],
        "when": "When did {S} see {x} live?",
        "near": ["Tickets for {x} sold out in two minutes.", "My roommate plays {x} on repeat."],
    },
    {
        "slots": {
            "x": [
                "a vintage camera",
                "a pottery wheel",
                "noise-cancelling headphones",
                "a telescope",
                "a sewing machine",
            ],
            "y": ["mom", "dad", "grandma", "girlfriend", "husband"],
        },
        "say": [
            "For my {y}'s birthday I got {x}, they loved it!",
            "I gave my {y} {x} for their birthday, total hit.",
        ],
        "ask": ["What present did {S} give their {y}?", "What did {S} buy for a birthday gift?"],
        "when": "When did {S} give the birthday present to their {y}?",
        "near": ["I want {x} myself but it's too pricey.", "My {y} never likes my gifts, ha."],
    },
    {
        "slots": {
            "x": ["a used Honda Civic", "an electric scooter", "a road bike", "a tiny camper van"]
        },
        "say": [
            "I finally bought {x}! No more waiting for the bus.",
            "Picked up {x} this morning, best purchase this year.",
        ],
        "ask": ["What vehicle did {S} get?", "What did {S} buy so they wouldn't need the bus?"],
        "when": "When did {S} buy {x}?",
        "near": [
            "My dad keeps saying he'll buy {x} someday.",
            "Someone scratched {x} in our parking lot.",
        ],
    },
    {
        "slots": {
            "x": [
                "tomatoes",
                "strawberries",
                "sunflowers",
                "chili peppers",
                "herbs like basil and mint",
            ]
        },
        "say": [
            "My balcony garden is thriving, the {x} are finally growing!",
            "I planted {x} in the backyard, checking them every morning.",
        ],
        "ask": ["What is {S} growing at home?", "What did {S} plant?"],
        "when": "When did {S} say the {x} started growing?",
        "near": ["The market had cheap {x} today.", "My grandpa used to grow {x}."],
    },
    {
        "slots": {"x": ["driving test", "bar exam", "nursing boards", "IELTS", "CPA exam"]},
        "say": [
            "I passed my {x}!!! All those late nights paid off.",
            "Results came in, I passed the {x} on my first try.",
        ],
        "ask": ["Which exam did {S} pass?", "What test did {S} succeed at after studying late?"],
        "when": "When did {S} pass the {x}?",
        "near": ["My friend failed the {x} twice.", "The {x} is coming up for my cousin."],
    },
    {
        "slots": {"x": ["heights", "deep water", "spiders", "thunderstorms", "the dark"]},
        "say": [
            "Honestly I've been scared of {x} since I was a kid.",
            "I know it's silly but {x} terrify me.",
        ],
        "ask": ["What is {S} afraid of?", "What has frightened {S} since childhood?"],
        "when": "When did {S} admit being scared of {x}?",
        "near": [
            "My little brother isn't afraid of anything.",
            "There was a show about {x} on TV.",
        ],
    },
    {
        "slots": {"x": ["a marathon", "a half marathon", "a triathlon", "a 10k trail race"]},
        "say": [
            "My goal this year is to run {x}, I started training today.",
            "I registered for {x} in the fall, wish me luck.",
        ],
        "ask": ["What race is {S} training for?", "What athletic goal did {S} set?"],
        "when": "When did {S} decide to train for {x}?",
        "near": [
            "Watching people finish {x} always makes me cry.",
            "My coworker did {x} and couldn't walk for a week.",
        ],
    },
]

EN_MULTI = [
    {
        "slots": {
            "r": ["sister", "brother", "cousin"],
            "n": ["Lily", "Sam", "Nora", "Theo"],
            "c": ["Denver", "Austin", "Seattle", "Boston"],
            "w": ["bakery", "hospital", "bookstore", "law firm"],
        },
        "say1": "My {r} {n} just moved to {c}, I miss {n} already.",
        "say2": "{n} called yesterday, {n} started working at a {w} there.",
        "ask": [
            "Where does {S}'s {r} work after moving to {c}?",
            "What kind of place does the {r} who moved to {c} work at?",
        ],
    },
    {
        "slots": {
            "a": ["a cat named Whiskers", "a parrot named Kiwi", "a rabbit named Clover"],
            "b": ["a hamster", "two goldfish", "a turtle"],
        },
        "say1": "Sorry, late reply, {a} knocked my phone off the table.",
        "say2": "We got {b} for the kids this week, the house is a zoo now.",
        "ask": ["What pets does {S} have?", "Which animals live in {S}'s home?"],
    },
    {
        "slots": {"a": ["guitar", "piano", "drums"], "b": ["ukulele", "saxophone", "cello"]},
        "say1": "Played {a} for three hours tonight, my fingers hurt.",
        "say2": "I started learning {b} too, the neighbors are thrilled, ha.",
        "ask": [
            "What instruments does {S} play?",
            "Which musical instruments has {S} mentioned playing?",
        ],
    },
]

EN_RECUR = [  # the same kind of event several times: a time-named question picks one
    {
        "slots": {
            "x": [
                "Mount Tam",
                "Bear Ridge",
                "Eagle Peak",
                "Pine Hollow",
                "Lake Trail",
                "Red Canyon",
            ]
        },
        "say": "This weekend I went hiking at {x}, my legs are dead.",
        "ask": "Where did {S} go hiking {T}?",
    },
    {
        "slots": {
            "x": [
                "an Italian place",
                "a sushi bar",
                "a Korean BBQ spot",
                "a vegan cafe",
                "a taco truck",
                "a dim sum house",
            ]
        },
        "say": "Had dinner at {x} with coworkers, way too much food.",
        "ask": "Where did {S} eat dinner with coworkers {T}?",
    },
]

EN_UPDATE = [
    {
        "slots": {
            "a": ["Brightline", "Maple Health", "Orbit Studio"],
            "b": ["Harbor Kitchen", "Greenfield School", "Nimbus Labs"],
        },
        "say1": "Work at {a} is so busy this month.",
        "say2": "Big change: I left {a}, I'm at {b} now and the team is lovely.",
        "ask": "Where does {S} work now?",
    },
    {
        "slots": {
            "a": ["Oak Street", "the east side", "downtown"],
            "b": ["Riverside", "Hill Road", "the old harbor district"],
        },
        "say1": "Our apartment on {a} has the tiniest kitchen.",
        "say2": "We moved! New place in {b}, boxes everywhere.",
        "ask": "Which neighborhood does {S} live in now?",
    },
]

EN_FILLER = [
    "Haha yeah, totally.",
    "How was your day?",
    "Not bad, pretty tired though.",
    "Same here, work was long.",
    "Did you eat yet?",
    "Lol that's so you.",
    "Good morning!",
    "It's raining again, ugh.",
    "Let's catch up properly this weekend.",
    "I'm so sleepy today.",
    "Wait really?",
    "That's wild.",
    "Anyway, what are you up to?",
    "Just scrolling on my phone.",
    "Coffee is the only thing keeping me alive.",
    "Traffic was terrible this morning.",
    "I need a vacation honestly.",
    "Hope your week gets better!",
    "Talk later, gotta run.",
    "Miss hanging out!",
    "Did you see the news?",
    "I'm watching a random show.",
    "Hmm, not sure.",
    "OK sounds good.",
    "Haha I love that.",
    "That's amazing, congrats!",
    "Oh no, are you okay?",
    "Tell me more!",
    "So proud of you!",
    "That sounds fun.",
    "I'd be so nervous.",
    "You deserve it.",
    "What a week.",
    "Can't wait to hear how it goes.",
    "Take care of yourself.",
    "Nice, send pictures!",
]

ZH_FACTS = [
    {
        "slots": {"x": ["陶艺", "拉丁舞", "攀岩", "水彩画", "小提琴", "日语", "击剑", "游泳"]},
        "say": [
            "跟你说，我报了社区中心的{x}课！第一节课手忙脚乱，但是好好玩。",
            "我终于开始学{x}了，每周四晚上上课，老师特别有耐心。",
        ],
        "ask": ["{S}最近开始学什么？", "{S}报了哪个兴趣班？"],
        "when": "{S}什么时候开始学{x}的？",
        "near": [
            "我表哥学了两个星期{x}就放弃了，说太难。",
            "市中心新开了一家{x}工作室，看到海报了。",
        ],
    },
    {
        "slots": {
            "x": ["柯基", "柴犬", "金毛", "哈士奇", "泰迪", "边牧"],
            "n": ["豆豆", "可乐", "年糕", "球球", "旺财", "布丁"],
        },
        "say": [
            "这周末我们从救助站领养了一只{x}，取名叫{n}！",
            "介绍一下，我家新来的{x}，叫{n}，周六接回来的，已经把我拖鞋咬坏了。",
        ],
        "ask": ["{S}养的新狗是什么品种？", "{S}家的小狗叫什么名字？"],
        "when": "{S}什么时候领养的小狗？",
        "near": ["邻居家的{x}整晚叫，烦死了。", "今天有只{x}跑进咖啡店，好可爱。"],
    },
    {
        "slots": {
            "x": ["厦门", "西安", "成都", "大理", "青岛", "哈尔滨", "桂林"],
            "y": ["古城墙", "海边日落", "夜市", "温泉", "寺庙", "植物园"],
        },
        "say": [
            "刚从{x}回来！那里的{y}太美了，我拍了五百张照片。",
            "这次去{x}玩得超开心，我们在{y}待了一整个下午。",
        ],
        "ask": ["{S}去哪个城市旅游了？", "{S}在哪儿度假看到了{y}？"],
        "when": "{S}什么时候从{x}旅游回来的？",
        "near": ["我老板总讲他在{x}住过一年的事。", "昨天看了一部关于{x}的纪录片。"],
    },
    {
        "slots": {
            "x": [
                "《沉默的果园》",
                "《北极光日记》",
                "《小事地图》",
                "《玻璃渡轮》",
                "《空谷之冬》",
            ],
            "y": ["一个灯塔看守人", "战争年代的两姐妹", "一个象棋天才", "一名被困的宇航员"],
        },
        "say": [
            "我最近在看{x}，讲的是{y}的故事，根本停不下来。",
            "在地铁上开始读{x}了，写{y}的，太好看了。",
        ],
        "ask": ["{S}最近在读什么书？", "{S}说哪本小说让人停不下来？"],
        "when": "{S}什么时候开始读{x}的？",
        "near": ["我们读书会选了一本写{y}的书，说实话挺无聊。", "你听说过{x}吗？我姐特别讨厌。"],
    },
    {
        "slots": {
            "x": ["数据分析师", "护士", "平面设计师", "老师", "厨师", "建筑师"],
            "y": ["星河科技", "仁和医院", "轨道工作室", "青禾学校", "港湾餐厅"],
        },
        "say": ["我拿到offer了！！下个月去{y}当{x}。", "今天签了合同，以后就在{y}做{x}了。"],
        "ask": ["{S}接受了什么工作？", "{S}拿到了什么职位？"],
        "when": "{S}什么时候拿到的工作offer？",
        "near": ["我朋友面试{x}没过。", "{y}又在招人了，到处都是广告。"],
    },
    {
        "slots": {
            "x": ["脚踝", "手腕", "膝盖", "肩膀"],
            "y": ["篮球", "足球", "网球", "排球", "滑板"],
        },
        "say": [
            "周日打{y}把{x}扭了，这段时间不能跑步了。",
            "唉，{y}比赛的时候伤到{x}了，医生说要休息两周。",
        ],
        "ask": ["{S}是怎么受伤的？", "{S}的{x}怎么了？"],
        "when": "{S}什么时候伤到{x}的？",
        "near": ["我弟每个周末都看{y}比赛。", "给我妈买了个护{x}的，她没事啦。"],
    },
    {
        "slots": {"x": ["红烧肉", "饺子", "西班牙海鲜饭", "香蕉蛋糕", "手工拉面", "柠檬挞"]},
        "say": ["昨晚第一次试着做{x}，居然还挺成功！", "花了整个周日做{x}，厨房一团糟但是值了。"],
        "ask": ["{S}做了什么菜？", "{S}第一次下厨做的是什么？"],
        "when": "{S}什么时候第一次做{x}？",
        "near": ["我公司楼下那家的{x}特别好吃。", "还是我妈做的{x}最好吃。"],
    },
    {
        "slots": {
            "x": ["姐姐", "哥哥", "表妹", "最好的朋友"],
            "y": ["六月", "十月", "年底", "春天"],
        },
        "say": ["大新闻，我{x}{y}要结婚了！我还要上台致辞，救命。", "我{x}刚订婚，婚礼定在{y}。"],
        "ask": ["{S}身边谁要结婚了？", "{S}要在谁的婚礼上致辞？"],
        "when": "{S}什么时候说{x}要结婚的？",
        "near": ["去年参加一个婚礼，蛋糕直接倒了。", "现在办婚礼真贵。"],
    },
    {
        "slots": {"x": ["流浪动物救助站", "食物银行", "儿童医院", "市图书馆", "社区食堂"]},
        "say": [
            "周六去{x}做志愿者了，整理捐赠物资弄了好几个小时。",
            "休息日去{x}帮忙了，感觉特别充实。",
        ],
        "ask": ["{S}去哪里做志愿者？", "{S}休息日去哪儿帮忙？"],
        "when": "{S}什么时候去{x}做的志愿者？",
        "near": ["我们附近那家{x}要关门了，好可惜。", "我姨妈在{x}上班。"],
    },
    {
        "slots": {"x": ["五月天", "周杰伦", "陈奕迅", "草东没有派对", "一个爵士三人组"]},
        "say": [
            "昨晚去看了{x}的演唱会，安可的时候我起了一身鸡皮疙瘩！",
            "终于现场看到{x}了，跟着唱到现在嗓子还是哑的。",
        ],
        "ask": ["{S}去看了谁的演出？", "{S}去了哪场演唱会？"],
        "when": "{S}什么时候去看的{x}演唱会？",
        "near": ["{x}的票两分钟就卖光了。", "我室友天天单曲循环{x}。"],
    },
    {
        "slots": {
            "x": ["一台复古相机", "一台拉坯机", "一副降噪耳机", "一台天文望远镜", "一台缝纫机"],
            "y": ["妈妈", "爸爸", "奶奶", "女朋友", "老公"],
        },
        "say": ["{y}生日我送了{x}，超喜欢！", "给{y}的生日礼物是{x}，大成功。"],
        "ask": ["{S}送了{y}什么礼物？", "{S}买了什么当生日礼物？"],
        "when": "{S}什么时候给{y}送的生日礼物？",
        "near": ["我自己也想要{x}，就是太贵了。", "我{y}从来不喜欢我送的东西，哈。"],
    },
    {
        "slots": {"x": ["一辆二手本田", "一辆电动滑板车", "一辆公路自行车", "一辆小房车"]},
        "say": ["我终于买了{x}！再也不用等公交了。", "今天早上提了{x}，今年最值的一笔。"],
        "ask": ["{S}买了什么交通工具？", "{S}买了什么以后就不用挤公交了？"],
        "when": "{S}什么时候买的{x}？",
        "near": ["我爸老说哪天要买{x}。", "停车场有人把{x}刮花了。"],
    },
    {
        "slots": {"x": ["番茄", "草莓", "向日葵", "辣椒", "薄荷和罗勒"]},
        "say": [
            "阳台上的小菜园长得很好，{x}终于冒出来了！",
            "我在后院种了{x}，每天早上都去看一眼。",
        ],
        "ask": ["{S}在家种了什么？", "{S}种的是什么植物？"],
        "when": "{S}什么时候说{x}长出来了？",
        "near": ["今天菜市场的{x}好便宜。", "我爷爷以前也种{x}。"],
    },
    {
        "slots": {"x": ["驾照考试", "法考", "护士资格考试", "雅思", "注会考试"]},
        "say": ["我{x}过了！！！熬的那些夜没白费。", "成绩出来了，{x}一次就过了。"],
        "ask": ["{S}通过了什么考试？", "{S}熬夜复习后考过了什么？"],
        "when": "{S}什么时候通过的{x}？",
        "near": ["我朋友{x}挂了两次。", "我表妹马上要{x}了。"],
    },
    {
        "slots": {"x": ["恐高", "怕深水", "怕蜘蛛", "怕打雷", "怕黑"]},
        "say": ["说实话我从小就{x}。", "我知道挺傻的，但我真的{x}。"],
        "ask": ["{S}害怕什么？", "{S}从小就怕的是什么？"],
        "when": "{S}什么时候说自己{x}的？",
        "near": ["我弟天不怕地不怕的。", "电视上在放讲{x}的节目。"],
    },
    {
        "slots": {"x": ["全程马拉松", "半程马拉松", "铁人三项", "十公里越野跑"]},
        "say": ["我今年的目标是跑一次{x}，今天开始训练了。", "报名了秋天的{x}，祝我好运。"],
        "ask": ["{S}在为什么比赛训练？", "{S}给自己定了什么运动目标？"],
        "when": "{S}什么时候决定跑{x}的？",
        "near": ["看别人跑完{x}我总会感动哭。", "我同事跑了个{x}，一周都走不了路。"],
    },
]

ZH_MULTI = [
    {
        "slots": {
            "r": ["姐姐", "哥哥", "表妹"],
            "n": ["小雨", "阿明", "婷婷", "大伟"],
            "c": ["深圳", "杭州", "重庆", "南京"],
            "w": ["面包店", "医院", "书店", "律师事务所"],
        },
        "say1": "我{r}{n}刚搬去{c}了，已经开始想{n}了。",
        "say2": "{n}昨天打电话说在那边的一家{w}上班了。",
        "ask": ["{S}的{r}搬到{c}以后在哪儿工作？", "搬去{c}的那位{r}在什么地方上班？"],
    },
    {
        "slots": {
            "a": ["一只叫咪咪的猫", "一只叫奇异果的鹦鹉", "一只叫三叶草的兔子"],
            "b": ["一只仓鼠", "两条金鱼", "一只乌龟"],
        },
        "say1": "不好意思回晚了，{a}把我手机从桌上扒下去了。",
        "say2": "这周给孩子们买了{b}，家里快成动物园了。",
        "ask": ["{S}家里养了哪些宠物？", "{S}家有什么小动物？"],
    },
    {
        "slots": {"a": ["吉他", "钢琴", "架子鼓"], "b": ["尤克里里", "萨克斯", "大提琴"]},
        "say1": "今晚弹了三个小时{a}，手指好疼。",
        "say2": "我又开始学{b}了，邻居们可高兴了，哈哈。",
        "ask": ["{S}会哪些乐器？", "{S}提到过在练什么乐器？"],
    },
]

ZH_RECUR = [
    {
        "slots": {"x": ["香山", "凤凰岭", "灵山", "百望山", "妙峰山", "八达岭"]},
        "say": "这个周末去{x}爬山了，腿都废了。",
        "ask": "{S}{T}去哪里爬山了？",
    },
    {
        "slots": {
            "x": [
                "一家意大利餐厅",
                "一家寿司店",
                "一家韩式烤肉",
                "一家素食咖啡馆",
                "一家云南菜馆",
                "一家早茶店",
            ]
        },
        "say": "和同事去{x}吃了晚饭，点太多了。",
        "ask": "{S}{T}和同事在哪儿吃的晚饭？",
    },
]

ZH_UPDATE = [
    {
        "slots": {
            "a": ["星河科技", "仁和医院", "轨道工作室"],
            "b": ["港湾餐厅", "青禾学校", "云端实验室"],
        },
        "say1": "这个月{a}的工作好忙。",
        "say2": "有个大变化：我从{a}离职了，现在在{b}，同事都很好。",
        "ask": "{S}现在在哪里上班？",
    },
    {
        "slots": {"a": ["梧桐路", "东城", "市中心"], "b": ["滨江", "山前路", "老码头那边"]},
        "say1": "我们在{a}的房子厨房小得可怜。",
        "say2": "搬家啦！新家在{b}，到处都是箱子。",
        "ask": "{S}现在住在哪一带？",
    },
]

ZH_FILLER = [
    "哈哈哈对啊",
    "今天过得怎么样？",
    "还行，就是有点累。",
    "我也是，上班好久。",
    "吃饭了吗？",
    "笑死，太像你了。",
    "早上好！",
    "又下雨了，烦。",
    "这周末好好聚一下吧。",
    "今天好困。",
    "真的假的？",
    "离谱。",
    "你在干嘛呢？",
    "刷手机呢。",
    "全靠咖啡续命。",
    "早上堵车堵死了。",
    "真想放个假。",
    "希望你这周顺利！",
    "先不说了，我得走了。",
    "好想一起玩啊。",
    "看新闻了吗？",
    "在随便看个剧。",
    "嗯，不太确定。",
    "好的没问题。",
    "哈哈我喜欢。",
    "太棒了，恭喜！",
    "啊，你还好吗？",
    "快说说！",
    "为你骄傲！",
    "听起来好好玩。",
    "换我肯定紧张死。",
    "你值得的。",
    "这周真是。",
    "等你好消息。",
    "照顾好自己。",
    "不错哦，发照片！",
]

EN_NAMES = [
    ("Maya", "Jon"),
    ("Ava", "Leo"),
    ("Grace", "Omar"),
    ("Nina", "Eli"),
    ("Zoe", "Ben"),
    ("Iris", "Kai"),
]
ZH_NAMES = [
    ("小林", "阿杰"),
    ("晓雯", "大鹏"),
    ("思琪", "浩然"),
    ("小雪", "子轩"),
    ("佳怡", "宇航"),
    ("梦瑶", "俊杰"),
]

EN_TIMES = {"week": "last week", "month": "last month", "date": "on {date}"}
ZH_TIMES = {"week": "上周", "month": "上个月", "date": "{date}"}


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def _pick(rng: random.Random, slots: dict[str, list[str]]) -> dict[str, str]:
    return {k: rng.choice(v) for k, v in slots.items()}


def _other(
    rng: random.Random, slots: dict[str, list[str]], values: dict[str, str]
) -> dict[str, str]:
    """Slot values that differ from ``values`` in every slot that has alternatives."""
    return {k: rng.choice([x for x in v if x != values[k]] or v) for k, v in slots.items()}


def _date_text(lang: str, d: datetime) -> str:
    return f"{d.month}月{d.day}日" if lang == "zh" else f"{d:%B} {d.day}"


def build(
    seed: int = 7,
    conversations: int = 10,
    sessions: int = 24,
    turns_per_session: int = 24,
    end: datetime = datetime(2026, 11, 28, 21, 0, tzinfo=TZ),
) -> tuple[list[Conversation], list[Question]]:
    """Conversations (half English, half Chinese) and their questions."""
    rng = random.Random(seed)
    convs: list[Conversation] = []
    questions: list[Question] = []
    for c in range(conversations):
        lang = "en" if c % 2 == 0 else "zh"
        names = (EN_NAMES if lang == "en" else ZH_NAMES)[c // 2 % 6]
        conv, qs = _conversation(rng, f"c{c}", lang, names, sessions, turns_per_session, end)
        convs.append(conv)
        questions += qs
    return convs, questions


def _conversation(
    rng: random.Random,
    cid: str,
    lang: str,
    names: tuple[str, str],
    n_sessions: int,
    per_session: int,
    end: datetime,
) -> tuple[Conversation, list[Question]]:
    facts, multi, recur, update, filler = (
        (EN_FACTS, EN_MULTI, EN_RECUR, EN_UPDATE, EN_FILLER)
        if lang == "en"
        else (ZH_FACTS, ZH_MULTI, ZH_RECUR, ZH_UPDATE, ZH_FILLER)
    )
    # sessions every 5-12 days back from a few days before `end`, the last one 1-2 days ago
    times: list[datetime] = []
    t = end - timedelta(days=rng.randint(1, 2), hours=rng.randint(0, 5))
    for _ in range(n_sessions):
        times.append(t)
        t -= timedelta(days=rng.randint(5, 12), hours=rng.randint(-3, 3))
    times.reverse()
    # what each session says: (speaker index, text, tag) lines; tags mark evidence
    plan: list[list[tuple[int, str, str]]] = [[] for _ in range(n_sessions)]
    asks: list[
        tuple[str, list[str], str, datetime | None]
    ] = []  # question, evidence tags, category, now
    now = end

    def place(session: int, speaker: int, text: str, tag: str = "") -> None:
        plan[session].append((speaker, text, tag))

    for i, spec in enumerate(rng.sample(facts, k=min(len(facts), 14))):
        s = rng.randrange(n_sessions)
        who = rng.randrange(2)
        values = _pick(rng, spec["slots"])
        tag = f"f{i}"
        place(s, who, _fill(rng.choice(spec["say"]), values), tag)
        for _ in range(2):  # hard negatives: the topic again, other details, the other speaker
            place(
                rng.randrange(n_sessions),
                1 - who,
                _fill(rng.choice(spec["near"]), _other(rng, spec["slots"], values)),
            )
        q = _fill(rng.choice(spec["ask"]), {**values, "S": names[who]})
        asks.append((q, [tag], "single", None))
        if rng.random() < 0.4:  # "when" about the same fact: answered by the session's date
            asks.append((_fill(spec["when"], {**values, "S": names[who]}), [tag], "temporal", None))
    for i, spec in enumerate(multi):
        s1, s2 = sorted(rng.sample(range(n_sessions), 2))
        who = rng.randrange(2)
        values = _pick(rng, spec["slots"])
        place(s1, who, _fill(spec["say1"], values), f"m{i}a")
        place(s2, who, _fill(spec["say2"], values), f"m{i}b")
        asks.append(
            (
                _fill(rng.choice(spec["ask"]), {**values, "S": names[who]}),
                [f"m{i}a", f"m{i}b"],
                "multi",
                None,
            )
        )
    for i, spec in enumerate(recur):
        who = rng.randrange(2)
        picks = rng.sample(spec["slots"]["x"], k=4)
        chosen = rng.sample(range(n_sessions), 4)
        for j, (s, x) in enumerate(zip(chosen, picks, strict=True)):
            place(s, who, _fill(spec["say"], {"x": x}), f"r{i}_{j}")
        # ask about the latest one by "last week"-style words, and about an earlier one by its date
        latest = max(range(4), key=lambda j: chosen[j])
        days = rng.randint(2, 5)
        ask_now = times[chosen[latest]] + timedelta(days=days)
        relative = (EN_TIMES if lang == "en" else ZH_TIMES)["week"]
        asks.append(
            (
                _fill(spec["ask"], {"S": names[who], "T": relative}),
                [f"r{i}_{latest}"],
                "temporal",
                ask_now,
            )
        )
        earlier = min(range(4), key=lambda j: chosen[j])
        dated = (EN_TIMES if lang == "en" else ZH_TIMES)["date"].format(
            date=_date_text(lang, times[chosen[earlier]])
        )
        asks.append(
            (
                _fill(spec["ask"], {"S": names[who], "T": dated}),
                [f"r{i}_{earlier}"],
                "temporal",
                None,
            )
        )
    for i, spec in enumerate(update):
        who = rng.randrange(2)
        s1, s2 = sorted(rng.sample(range(n_sessions // 2, n_sessions), 2))
        s0 = rng.randrange(n_sessions // 2)
        values = _pick(rng, spec["slots"])
        place(s0, who, _fill(spec["say1"], values), "")
        place(s1, who, _fill(spec["say1"], values), "")
        place(s2, who, _fill(spec["say2"], values), f"u{i}")
        asks.append((_fill(spec["ask"], {"S": names[who]}), [f"u{i}"], "update", None))

    conv = Conversation(id=cid, lang=lang, speakers=names)
    tag_to_id: dict[str, str] = {}
    for s, start in enumerate(times):
        lines = plan[s]
        # small talk around the planned lines, each fact answered by the other speaker
        body: list[tuple[int, str, str]] = []
        for who, text, tag in lines:
            body.append((who, text, tag))
            body.append((1 - who, rng.choice(filler), ""))
        while len(body) < per_session:
            body.insert(rng.randrange(len(body) + 1), (rng.randrange(2), rng.choice(filler), ""))
        session = []
        for k, (who, text, tag) in enumerate(body):
            turn = Turn(
                id=f"{cid}:s{s}:t{k}",
                speaker=names[who],
                text=text,
                time=start + timedelta(minutes=k),
            )
            session.append(turn)
            if tag:
                tag_to_id[tag] = turn.id
        conv.sessions.append(session)
    questions = [
        Question(
            conv=cid, text=q, evidence=[tag_to_id[t] for t in tags], category=cat, now=at or now
        )
        for q, tags, cat, at in asks
    ]
    return conv, questions


if __name__ == "__main__":
    convs, qs = build()
    print(sum(len(c.turns) for c in convs), "turns,", len(qs), "questions")
    for q in qs[:40]:
        print(q.category, q.text, q.evidence)
