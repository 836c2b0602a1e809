"""What the people of bench/dialogue_set.py talk about: threads of their lives, written for it.

A `Thread` is one strand of a speaker's life (painting, camping, a new job...). It comes back in
several sessions as `Event`s, each an exchange of a few turns between the speaker ("S") and the
other person ("O") with slot values that differ every time (a sunset one month, a portrait of
grandma the next). Lines tagged ``detail`` / ``news`` / ``answer`` are the evidence questions point
at; many of them only make sense after the line before ("It's a sunset over the lake." answers
"What did you paint?"). ``traits`` are remarks that reveal what a person is like, the evidence of
the inference questions; ``relate`` is what the other person says about the same topic from their
own life (a realistic near miss).

Placeholders: ``{N}`` the name of the person spoken to; ``{S}`` the subject's name (questions);
``{their}`` / ``{they}`` / ``{them}`` the subject's pronouns (questions); slot ``{x}``, its short
form ``{x_}`` (the part after ``|`` in a slot value) and ``{X}`` (capitalised).

All text here was written for this benchmark (no dialogue corpus was copied).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Line:
    who: str
    """'S' (the subject of the thread) or 'O' (the other person)."""
    say: tuple[str, ...]
    tag: str = ""
    """Evidence role of the line (questions name tags), or ''."""
    p: float = 1.0
    """Probability the line is said at all."""


@dataclass(frozen=True)
class Ask:
    category: str
    """'single' or 'temporal'."""
    text: tuple[str, ...]
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Event:
    slots: dict[str, list[str]]
    lines: tuple[Line, ...]
    asks: tuple[Ask, ...]


@dataclass(frozen=True)
class Thread:
    name: str
    topic: str
    """How the other person refers to it in passing ("your painting")."""
    events: tuple[Event, ...]
    multi: tuple[tuple[str, int, str], ...] = ()
    """Questions over every occurrence: (text, event index, evidence tag)."""
    traits: tuple[str, ...] = ()
    infer: tuple[str, ...] = ()
    """Inference questions; evidence: the trait lines said (and the multi evidence when
    ``infer_events``)."""
    relate: tuple[str, ...] = ()
    infer_events: bool = False
    kids: bool = False
    """Needs a speaker with children."""
    extra: dict[str, str] = field(default_factory=dict)


def subject(*say: str, tag: str = "", p: float = 1.0) -> Line:
    return Line("S", say, tag, p)


def other(*say: str, tag: str = "", p: float = 1.0) -> Line:
    return Line("O", say, tag, p)


def single(*text: str, ev: tuple[str, ...] = ("detail",)) -> Ask:
    return Ask("single", text, ev)


def when(*text: str, ev: tuple[str, ...] = ("detail",)) -> Ask:
    return Ask("temporal", text, ev)


THREADS: list[Thread] = [
    Thread(
        name="painting",
        topic="painting",
        events=(
            Event(
                slots={
                    "subj": [
                        "a sunset over the lake|a sunset",
                        "a portrait of my grandma|a portrait of {their} grandma",
                        "a field of sunflowers|sunflowers",
                        "the old red barn down our road|a red barn",
                        "a stormy sea with one tiny boat|a stormy sea",
                        "my cat asleep on the windowsill|{their} cat",
                        "the city skyline at night|the skyline",
                        "a bowl of lemons on a blue tablecloth|lemons",
                        "a foggy forest path|a forest path",
                        "my kitchen window in the rain|a rainy window",
                    ],
                    "med": ["watercolors", "acrylics", "oil paints", "gouache", "pastels"],
                },
                lines=(
                    subject(
                        "I finally finished the painting I'd been fussing over for weeks!",
                        "Spent most of the weekend at my easel again, and I think I made something I actually like.",
                        "So I painted something new this week, first time in a while I'm happy with how it came out.",
                    ),
                    other(
                        "Ooh, what's it of?",
                        "No way, what did you paint?",
                        "Yay! Show me sometime. What's the subject?",
                    ),
                    subject(
                        "It's {subj}. I used {med} this time, which was a whole new challenge.",
                        "{Subj}! Did the whole thing in {med}, and getting the light right took forever.",
                        "{Subj}, in {med}. I wanted it to feel calm, the way I felt sitting there.",
                        tag="detail",
                    ),
                    other(
                        "That sounds beautiful, {N}. You're seriously talented.",
                        "I'd hang that on my wall in a heartbeat.",
                        "You have to send me a picture of it!",
                    ),
                    subject(
                        "Thanks! It's going in the hallway for now.",
                        "Ha, I'll send one tonight. Still not sure about the corners.",
                        p=0.5,
                    ),
                ),
                asks=(
                    single(
                        "What did {S} paint with {med}?",
                        "What was the subject of {S}'s {med} painting?",
                    ),
                    when("When did {S} paint {subj_}?"),
                ),
            ),
            Event(
                slots={
                    "venue": [
                        "the little gallery cafe on Main Street|the gallery cafe",
                        "the library's community art wall|the library",
                        "the art tent at the county fair|the county fair",
                        "a pop-up gallery downtown|a pop-up gallery",
                    ]
                },
                lines=(
                    subject(
                        "Guess what! {Venue} is going to show two of my paintings next month!",
                        "Big news from my side: {venue} picked two of my pieces for their next show.",
                        tag="detail",
                    ),
                    other(
                        "Wait, seriously?! That's huge, congrats!",
                        "No way! That's incredible, you must be thrilled.",
                    ),
                    subject(
                        "I'm terrified, honestly. What if nobody likes them?",
                        "I keep changing my mind about which frames to use, ha.",
                    ),
                    other(
                        "People are going to love them, stop worrying.",
                        "I'm coming to see them, no excuses.",
                    ),
                ),
                asks=(
                    single(
                        "Where were {S}'s paintings going to be shown?",
                        "Which place picked {S}'s paintings for a show?",
                    ),
                    when("When did {S} find out {their} paintings would be shown at {venue_}?"),
                ),
            ),
        ),
        multi=(
            ("What has {S} painted?", 0, "detail"),
            ("What subjects has {S} chosen for {their} paintings?", 0, "detail"),
        ),
        traits=(
            "Painting is the one thing that really quiets my head after a long day.",
            "Honestly, when I'm stressed, I grab a brush before anything else. It keeps me sane.",
            "I get lost in colors for hours, it's like the rest of the world switches off.",
        ),
        infer=(
            "Would {S} likely enjoy a weekend art retreat?",
            "What does {S} probably do to unwind after a stressful week?",
        ),
        relate=(
            "I wish I could paint, my stick figures look sad.",
            "My aunt used to paint landscapes, her whole house is full of them.",
            "I tried one of those paint-and-sip nights once, my canvas was a disaster.",
        ),
    ),
    Thread(
        name="camping",
        topic="camping",
        events=(
            Event(
                slots={
                    "place": [
                        "Pine Lake|Pine Lake",
                        "the Blue Ridge mountains|the Blue Ridge mountains",
                        "a state park right by the coast|a state park by the coast",
                        "Redwood Hollow|Redwood Hollow",
                        "a canyon out in the desert|a desert canyon",
                        "Silver Creek|Silver Creek",
                        "Eagle Island|Eagle Island",
                    ],
                    "comp": [
                        "the kids|{their} kids",
                        "my sister|{their} sister",
                        "a couple of friends from work|coworkers",
                        "my partner|{their} partner",
                        "my dad|{their} dad",
                    ],
                    "high": [
                        "we saw a black bear from a safe distance|they saw a black bear",
                        "it poured the whole second night|it poured all night",
                        "we watched a meteor shower lying on the grass|they watched a meteor shower",
                        "we found a waterfall nobody else knew about|they found a hidden waterfall",
                        "a raccoon stole our entire bag of marshmallows|a raccoon stole their marshmallows",
                        "we woke up to the tent covered in frost|their tent froze overnight",
                    ],
                },
                lines=(
                    subject(
                        "We just got back from a camping trip with {comp}, I'm still finding sand in my bag.",
                        "Went camping over the long weekend with {comp}! Totally unplugged for three days.",
                    ),
                    other(
                        "Oh fun! Where did you go?",
                        "Ahh jealous. Where'd you camp?",
                        "How was it? Where did you end up going?",
                    ),
                    subject(
                        "{Place}. And {high}, I'll never forget it.",
                        "We went to {place}. Best part? {High}.",
                        tag="detail",
                    ),
                    other(
                        "Sounds like a real adventure.",
                        "Okay that's amazing, I need to go camping more.",
                        "Were the bugs terrible at least? Tell me something went wrong, ha.",
                    ),
                    subject(
                        "Ha, yes, I'm covered in bites. Totally worth it though.",
                        "We're already planning the next one.",
                        p=0.6,
                    ),
                ),
                asks=(
                    single(
                        "Where did {S} go camping with {comp_}?",
                        "Where did {S} go camping when {high_}?",
                    ),
                    when(
                        "When did {S} go camping at {place_}?",
                        "When did {S} go on the camping trip with {comp_}?",
                    ),
                ),
            ),
        ),
        multi=(
            ("Where has {S} gone camping?", 0, "detail"),
            ("What places has {S} camped at?", 0, "detail"),
        ),
        traits=(
            "I feel most like myself out in nature, away from screens.",
            "Give me a tent and a campfire over a fancy hotel any day.",
            "Being outdoors is how I recharge, I get antsy if I'm inside too long.",
        ),
        infer=(
            "Would {S} prefer a vacation in a big city or out in nature?",
            "Would {S} likely enjoy a week-long backpacking trip?",
        ),
        infer_events=True,
        relate=(
            "I've never camped in my life, I like having a real bed.",
            "My brother camps every summer, he sends me the most ridiculous photos.",
            "We camped once when I was a kid and a storm flattened our tent.",
        ),
    ),
    Thread(
        name="kids",
        topic="the kids",
        kids=True,
        events=(
            Event(
                slots={
                    "kid": [
                        "my son|son",
                        "my daughter|daughter",
                        "my youngest|youngest child",
                        "my oldest|oldest child",
                    ],
                    "feat": [
                        "learned to ride a bike without training wheels|learn to ride a bike without training wheels",
                        "lost a first tooth at the dinner table|lose a first tooth",
                        "won the school spelling bee|win the spelling bee",
                        "played a tree in the school play and took it very seriously|play a tree in the school play",
                        "scored a first goal at soccer practice|score a first soccer goal",
                        "read a whole chapter book alone|read a chapter book alone",
                    ],
                },
                lines=(
                    subject(
                        "Proud parent moment: {kid} {feat}!",
                        "You won't believe it, {kid} {feat} this weekend.",
                        tag="detail",
                    ),
                    other(
                        "Aww, that's so sweet! You must have been beaming.",
                        "That's adorable, tell them congrats from me!",
                        "No way, they grow up so fast.",
                    ),
                    subject(
                        "I totally cried a little, not gonna lie.",
                        "I took about a hundred videos, ha.",
                        p=0.7,
                    ),
                ),
                asks=(
                    single(
                        "What did {S}'s {kid_} do that made {them} proud?",
                        "What milestone did {S}'s {kid_} reach?",
                    ),
                    when("When did {S}'s {kid_} {feat_}?"),
                ),
            ),
            Event(
                slots={
                    "place": [
                        "the aquarium|the aquarium",
                        "the science museum|the science museum",
                        "a pumpkin patch|a pumpkin patch",
                        "the zoo|the zoo",
                        "a water park|a water park",
                        "the planetarium|the planetarium",
                    ],
                    "fav": [
                        "the jellyfish room",
                        "a giant dinosaur skeleton",
                        "a hay maze",
                        "the penguins",
                        "a huge wave pool",
                        "the star show in the dome",
                    ],
                },
                lines=(
                    subject(
                        "We took the kids to {place} on Sunday, they were bouncing off the walls all morning.",
                        "Family day out at {place} this weekend, total chaos but so fun.",
                        tag="detail",
                    ),
                    other(
                        "How did they like it?",
                        "Haha, what was their favorite part?",
                        "Oh cute, did they have fun?",
                    ),
                    subject(
                        "They couldn't stop talking about {fav}, it's all they've drawn since.",
                        "The big hit was {fav}. We had to drag them out at closing time.",
                        tag="answer",
                    ),
                    other(
                        "That's precious.",
                        "I love days like that.",
                        "Sounds like a perfect Sunday honestly.",
                    ),
                ),
                asks=(
                    single(
                        "What did {S}'s kids love most at {place_}?",
                        "What was the highlight for {S}'s kids at {place_}?",
                        ev=("answer",),
                    ),
                    when("When did {S} take the kids to {place_}?"),
                ),
            ),
        ),
        multi=(
            ("What places has {S} taken {their} kids to?", 1, "detail"),
            ("What have {S}'s kids achieved?", 0, "detail"),
        ),
        traits=(
            "Being a parent is exhausting but it's the best thing I've ever done.",
            "My kids are my whole world, everything I do is for them.",
            "I always wanted a big family, honestly I'd love one more.",
        ),
        infer=("Would {S} likely want more children?", "What matters most to {S} in life?"),
        relate=(
            "I'm not sure I'm cut out to be a parent, I can barely keep a plant alive.",
            "My niece is the same age, she's obsessed with dinosaurs.",
            "Kids are hilarious, my nephew asked me if I was born before phones.",
        ),
    ),
    Thread(
        name="pet",
        topic="your pet",
        events=(
            Event(
                slots={
                    "pet": [
                        "a rescue beagle|beagle",
                        "a scruffy terrier mix|terrier",
                        "an orange tabby kitten|kitten",
                        "a senior greyhound|greyhound",
                        "a gray rabbit|rabbit",
                        "a black lab puppy|lab puppy",
                    ],
                    "pname": [
                        "Biscuit",
                        "Pepper",
                        "Mango",
                        "Oliver",
                        "Juniper",
                        "Waffles",
                        "Sir Reginald",
                        "Noodle",
                    ],
                },
                lines=(
                    subject(
                        "So we have a new family member... we adopted {pet}!",
                        "I did something impulsive: I brought home {pet} from the shelter.",
                        tag="news",
                    ),
                    other(
                        "Stop it, that's so exciting! What's their name?",
                        "Aww! What did you name them?",
                        "No way! Name? Pictures?",
                    ),
                    subject(
                        "{Pname}! Super shy the first day, now follows me everywhere.",
                        "We went with {pname}. Already sleeping on my pillow, of course.",
                        tag="detail",
                    ),
                    other(
                        "{Pname} is the perfect name.",
                        "I need to meet them ASAP.",
                        "Send me pictures right now!",
                    ),
                ),
                asks=(
                    single(
                        "What is the name of {S}'s {pet_}?",
                        "What did {S} name the pet {they} adopted?",
                        ev=("detail",),
                    ),
                    when("When did {S} adopt {pname}?", ev=("news",)),
                ),
            ),
            Event(
                slots={
                    "ate": [
                        "a whole sock",
                        "half a chocolate bar",
                        "a rubber duck",
                        "my earbuds",
                        "a bunch of grapes",
                    ],
                    "vet": [
                        "an emergency vet visit at 2 a.m.|an emergency vet visit",
                        "an x-ray and a very expensive bill|an x-ray",
                        "a night under observation|a night at the vet",
                    ],
                },
                lines=(
                    subject(
                        "Our little monster gave us a scare this week.",
                        "Ugh, what a week. The pet decided to eat something stupid.",
                    ),
                    other("Oh no, what happened?", "Wait, is everyone okay?"),
                    subject(
                        "Ate {ate}! We ended up with {vet}, but he's fine now.",
                        "Swallowed {ate}. That meant {vet}. He's totally fine, my wallet isn't.",
                        tag="detail",
                    ),
                    other(
                        "Oh my gosh, I'm so glad he's okay.",
                        "Pets really keep you on your toes.",
                        "Poor baby. And poor you!",
                    ),
                ),
                asks=(
                    single("What did {S}'s pet swallow?", "Why did {S}'s pet need {vet_}?"),
                    when("When did {S}'s pet eat {ate}?"),
                ),
            ),
        ),
        multi=(("What pets does {S} have?", 0, "news"),),
        traits=(
            "Animals just get me, honestly I trust them more than most people.",
            "I can't imagine coming home to an empty house without a pet waiting.",
        ),
        infer=("Would {S} likely volunteer at an animal shelter?",),
        relate=(
            "I'm allergic to basically everything with fur, it's tragic.",
            "My neighbor's dog barks at me every single morning.",
            "We had a goldfish named Captain growing up, he lived for nine years somehow.",
        ),
    ),
    Thread(
        name="job",
        topic="work",
        events=(
            Event(
                slots={
                    "company": [
                        "Brightline Analytics",
                        "Maple Health",
                        "Orbit Studio",
                        "Greenfield Academy",
                        "Harbor Logistics",
                        "Nimbus Labs",
                        "Cedar Bank",
                    ],
                    "role": [
                        "a project coordinator",
                        "a UX designer",
                        "a data analyst",
                        "an office manager",
                        "a marketing lead",
                        "a lab technician",
                    ],
                },
                lines=(
                    subject(
                        "I had a job interview yesterday at {company}, my hands were shaking the whole time.",
                        "So... I applied to {company} and they called me in for an interview!",
                        tag="news",
                    ),
                    other(
                        "Oh exciting! What position?",
                        "Whoa, for what role?",
                        "Good luck!! What's the job?",
                    ),
                    subject(
                        "{Role}. It would be a big step up from what I do now.",
                        "It's for {role}, kind of my dream job if I'm honest.",
                        tag="detail",
                    ),
                    other(
                        "You'd be perfect for that, {N}.",
                        "Fingers crossed for you!",
                        "They'd be lucky to have you.",
                    ),
                ),
                asks=(
                    single(
                        "What position did {S} interview for at {company}?",
                        "What role did {S} apply for?",
                    ),
                    when("When did {S} have the interview at {company}?", ev=("news",)),
                ),
            ),
            Event(
                slots={
                    "first": [
                        "my boss took the whole team out for tacos",
                        "I got my own desk by the window",
                        "I accidentally joined the wrong meeting for an hour",
                        "the coffee machine broke and nobody knew how to fix it",
                        "I already got put on a big client project",
                    ]
                },
                lines=(
                    other(
                        "How's the new job treating you?",
                        "So, how's work going these days?",
                        "Wait, how did the first weeks at the new job go?",
                    ),
                    subject(
                        "Honestly really good. On my first day {first}, ha.",
                        "Pretty great so far! {First}, which felt like a good sign.",
                        tag="detail",
                    ),
                    other(
                        "Ha, that's a good start.",
                        "Love that for you.",
                        "See, I told you it'd be fine.",
                    ),
                ),
                asks=(
                    single(
                        "What happened in {S}'s first days at {their} new job?",
                        "How did {S}'s new job start?",
                    ),
                ),
            ),
            Event(
                slots={
                    "proj": [
                        "a new scheduling app|a scheduling app",
                        "the company's rebranding|a rebranding",
                        "a big product launch in Chicago|a product launch",
                        "moving all our files to a new system|a system migration",
                        "the annual fundraising gala|a fundraising gala",
                    ]
                },
                lines=(
                    subject(
                        "Work is insane right now, I'm leading {proj} and everything is due at once.",
                        "I've been put in charge of {proj}, wish me luck.",
                        tag="detail",
                    ),
                    other(
                        "That's a lot of responsibility, but you've got this.",
                        "Ugh, sounds stressful. Are they at least paying you more?",
                    ),
                    subject(
                        "Ha, I wish. But I'm learning a ton.",
                        "Not yet, but I'm keeping a list of everything I do, ha.",
                    ),
                ),
                asks=(
                    single(
                        "What project did {S} lead at work?", "What was {S} in charge of at work?"
                    ),
                    when("When was {S} leading {proj_}?"),
                ),
            ),
        ),
        multi=(("What has {S} been working on at {their} job?", 2, "detail"),),
        traits=(
            "I want work that actually helps people, not just a paycheck.",
            "I've always been the organizer in any group, I can't help it.",
        ),
        infer=("Would {S} likely enjoy managing a team?",),
        relate=(
            "My job is so boring lately, I count the minutes.",
            "My manager scheduled a meeting about reducing meetings, I'm not joking.",
            "I've been thinking about switching jobs too, honestly.",
        ),
    ),
    Thread(
        name="studies",
        topic="your classes",
        events=(
            Event(
                slots={
                    "course": [
                        "child psychology|child psychology",
                        "counseling skills|counseling",
                        "nursing prerequisites|nursing",
                        "graphic design|graphic design",
                        "environmental science|environmental science",
                        "accounting|accounting",
                    ],
                    "where": [
                        "at the community college",
                        "online in the evenings",
                        "at the university downtown",
                    ],
                },
                lines=(
                    subject(
                        "I signed up for a {course} course {where}! First class is Monday.",
                        "Big step: I enrolled in {course} {where}.",
                        tag="detail",
                    ),
                    other(
                        "That's amazing! What made you decide?",
                        "Whoa, what got you into that?",
                        "Love this. Why {course_}?",
                    ),
                    subject(
                        "I've been thinking about it for years. I want a career where I can actually make a difference.",
                        "I keep coming back to it, it feels like what I'm supposed to do.",
                        tag="why",
                    ),
                    other(
                        "You're going to be great at it.", "I'm so proud of you for going for it."
                    ),
                ),
                asks=(
                    single(
                        "What course did {S} enroll in?",
                        "What subject did {S} sign up to study {where}?",
                    ),
                    when("When did {S} sign up for the {course_} course?"),
                ),
            ),
            Event(
                slots={
                    "grade": [
                        "got an A on my first exam|got an A on {their} first exam",
                        "passed the midterm with the top score",
                        "finished my first big paper|finished {their} first big paper",
                        "got picked to present my project to the whole class|got picked to present a project to the class",
                    ]
                },
                lines=(
                    other(
                        "How are the classes going?",
                        "Are you still enjoying school?",
                        "How's studying going, by the way?",
                    ),
                    subject(
                        "Really well actually, I {grade}!",
                        "Tiring but great. I {grade}, which I did not expect.",
                        tag="detail",
                    ),
                    other("Look at you! That's awesome.", "I knew you'd crush it."),
                ),
                asks=(
                    single("How did {S} do in {their} classes?", "What did {S} achieve in school?"),
                    when("When did {S} say {they} {grade_}?"),
                ),
            ),
        ),
        multi=(("What has {S} studied?", 0, "detail"),),
        traits=(
            "I want to become a counselor someday, help people through what I went through.",
            "Learning new things keeps me going, I'd be a student forever if I could.",
            "I've always wanted a job where I listen to people and help them feel less alone.",
        ),
        infer=(
            "What career path would {S} likely pursue?",
            "Would {S} likely go back to school for another degree?",
        ),
        relate=(
            "I hated school honestly, I'm never going back.",
            "My cousin is in nursing school, she never sleeps.",
            "I took an online course once and quit after two videos, ha.",
        ),
    ),
    Thread(
        name="volunteer",
        topic="volunteering",
        events=(
            Event(
                slots={
                    "place": [
                        "the animal shelter|the animal shelter",
                        "the food bank|the food bank",
                        "the youth center|the youth center",
                        "a beach cleanup|a beach cleanup",
                        "the senior home on Elm Street|the senior home",
                        "the community garden|the community garden",
                    ],
                    "did": [
                        "walked dogs for three hours",
                        "packed about two hundred boxes of groceries",
                        "tutored kids in math",
                        "picked up bags full of plastic",
                        "read stories to the residents",
                        "built raised beds for vegetables",
                    ],
                },
                lines=(
                    subject(
                        "Spent my Saturday volunteering at {place}.",
                        "I finally went to volunteer at {place} like I said I would!",
                    ),
                    other(
                        "That's so kind. What did you do there?",
                        "Oh nice! What did they have you doing?",
                        "Good for you! How was it?",
                    ),
                    subject(
                        "We {did}. Exhausting but so rewarding.",
                        "I {did}. Honestly it was the best part of my week.",
                        tag="detail",
                    ),
                    other(
                        "The world needs more people like you, {N}.",
                        "That's really lovely.",
                        "I should come with you next time.",
                    ),
                ),
                asks=(
                    single(
                        "What did {S} do while volunteering at {place_}?",
                        "Where did {S} spend a day volunteering where {they} {did}?",
                    ),
                    when("When did {S} volunteer at {place_}?"),
                ),
            ),
        ),
        multi=(("Where has {S} volunteered?", 0, "detail"),),
        traits=(
            "Giving back is really important to me, people helped me a lot when I needed it.",
            "I think everyone should spend a few hours a month helping their community.",
        ),
        infer=(
            "Would {S} likely donate to a local charity drive?",
            "Would {S} likely join a neighborhood cleanup day?",
        ),
        infer_events=True,
        relate=(
            "I keep saying I'll volunteer and then never do.",
            "My company does one volunteer day a year, it's mostly a photo op.",
        ),
    ),
    Thread(
        name="music",
        topic="music",
        events=(
            Event(
                slots={
                    "instr": ["violin", "guitar", "piano", "cello", "ukulele", "drums"],
                    "song": [
                        "a Beatles song|a Beatles song",
                        "a tricky Bach piece|a Bach piece",
                        "the theme from an old movie|a movie theme",
                        "a folk song my grandpa used to sing|a folk song",
                        "a jazz standard|a jazz standard",
                    ],
                },
                lines=(
                    subject(
                        "I've been practicing {instr} every night this week.",
                        "My {instr} teacher gave me something really hard to learn.",
                    ),
                    other(
                        "Oh nice, what are you learning?",
                        "What's the piece?",
                        "Ooh, play something for me sometime! What song?",
                    ),
                    subject(
                        "{Song}. I'm butchering it for now, but it's getting there.",
                        "It's {song}. My neighbors must hate me.",
                        tag="detail",
                    ),
                    other(
                        "Ha, I'm sure it sounds great.",
                        "Music is such a good outlet.",
                        "I'd love to hear it.",
                    ),
                ),
                asks=(
                    single(
                        "What is {S} learning to play on the {instr}?",
                        "What piece did {S} practice on the {instr}?",
                    ),
                    when("When was {S} practicing {song_}?"),
                ),
            ),
            Event(
                slots={
                    "band": [
                        "a local jazz trio|a jazz trio",
                        "an indie rock band from Portland|an indie rock band",
                        "the city symphony|the symphony",
                        "a bluegrass group|a bluegrass group",
                        "a Beyonce cover band|a cover band",
                    ],
                    "venue": [
                        "a tiny bar downtown",
                        "the park amphitheater",
                        "the old opera house",
                        "a brewery patio",
                    ],
                },
                lines=(
                    subject(
                        "We went to see live music last night, I'm still buzzing.",
                        "Saw a concert on Friday, my ears are still ringing.",
                        tag="news",
                    ),
                    other("Who did you see?", "Oh fun! Who was playing?", "Ooh who? Was it good?"),
                    subject(
                        "{Band} at {venue}. So good, I danced the whole time.",
                        "{Band}, playing at {venue}. I'd go again tomorrow.",
                        tag="detail",
                    ),
                    other(
                        "Sounds like a perfect night.",
                        "I need to get out more, that sounds amazing.",
                    ),
                ),
                asks=(
                    single(
                        "Who did {S} see perform at {venue}?", "What live music did {S} go to see?"
                    ),
                    when("When did {S} see {band_} live?"),
                ),
            ),
        ),
        multi=(
            ("What musical instruments does {S} play?", 0, "detail"),
            ("What concerts has {S} been to?", 1, "detail"),
        ),
        traits=(
            "Music has always been my therapy, I'd be lost without it.",
            "I can't sit still when there's live music, it's embarrassing.",
        ),
        infer=("Would {S} likely go to a music festival?",),
        relate=(
            "I'm completely tone deaf, my family begs me not to sing.",
            "My roommate plays guitar at 2 a.m., it's a nightmare.",
        ),
    ),
    Thread(
        name="cooking",
        topic="cooking",
        events=(
            Event(
                slots={
                    "dish": [
                        "homemade lasagna|lasagna",
                        "pork dumplings from scratch|dumplings",
                        "a lemon tart|a lemon tart",
                        "Thai green curry|green curry",
                        "sourdough bread|sourdough",
                        "chicken pot pie|chicken pot pie",
                        "vegan chili|vegan chili",
                    ],
                    "result": [
                        "It came out perfect, I'm shocked",
                        "The bottom burned but the rest was great",
                        "My family asked for seconds, so I'm calling it a win",
                        "It took five hours and was gone in ten minutes",
                    ],
                },
                lines=(
                    subject(
                        "I tried a new recipe this weekend!",
                        "I spent all of Sunday in the kitchen, attempting something ambitious.",
                    ),
                    other("Ooh what did you make?", "What did you cook?", "Ha, and? What was it?"),
                    subject("{Dish}! {result}.", "{Dish}. {result}, ha.", tag="detail"),
                    other(
                        "Okay I'm hungry now.",
                        "You have to teach me sometime.",
                        "Save me some next time!",
                    ),
                ),
                asks=(
                    single("What dish did {S} try making?", "What did {S} cook on the weekend?"),
                    when("When did {S} make {dish_}?"),
                ),
            ),
            Event(
                slots={
                    "guests": [
                        "my whole book club|{their} book club",
                        "eight people from work|coworkers",
                        "my in-laws|{their} in-laws",
                        "the neighbors|the neighbors",
                    ],
                    "menu": [
                        "a taco bar",
                        "homemade pizza",
                        "a huge pot of paella",
                        "Korean barbecue",
                    ],
                },
                lines=(
                    subject(
                        "I hosted a dinner party on Saturday for {guests}.",
                        "We had {guests} over for dinner this weekend, I'm still recovering.",
                    ),
                    other("Brave! What did you serve?", "What was on the menu?", "How did it go?"),
                    subject(
                        "{Menu}. Not a crumb was left.",
                        "I did {menu}, which was way more work than I thought.",
                        tag="detail",
                    ),
                    other("You're such a good host.", "I'd have ordered pizza, ha."),
                ),
                asks=(
                    single(
                        "What did {S} serve at the dinner party for {guests_}?",
                    ),
                    when("When did {S} host dinner for {guests_}?"),
                ),
            ),
        ),
        multi=(("What dishes has {S} cooked?", 0, "detail"),),
        traits=(
            "Cooking for people is my love language, honestly.",
            "I find chopping vegetables weirdly relaxing.",
        ),
        infer=("Would {S} likely enjoy a cooking class?",),
        relate=(
            "I burned pasta last week. Pasta. In water.",
            "My mom's cooking is the only thing I miss about home.",
        ),
    ),
    Thread(
        name="running",
        topic="running",
        events=(
            Event(
                slots={
                    "race": [
                        "a 5K for mental health awareness|a charity 5K",
                        "my first half marathon|a half marathon",
                        "a 10K trail race|a trail race",
                        "the city marathon|a marathon",
                    ],
                    "time": [
                        "just under thirty minutes",
                        "two hours and ten minutes",
                        "a time I'm actually proud of",
                        "dead last, but I finished",
                    ],
                },
                lines=(
                    subject(
                        "I ran {race} on Saturday!",
                        "Did it! I finished {race} this weekend.",
                        tag="detail",
                    ),
                    other(
                        "Amazing! How did it go?",
                        "Whoa, how'd you do?",
                        "Congrats!! What was your time?",
                    ),
                    subject(
                        "I came in at {time}, and my legs are still angry at me.",
                        "{Time}. I cried at the finish line, ha.",
                        tag="answer",
                    ),
                    other(
                        "That's incredible.",
                        "So proud of you, {N}!",
                        "I can't even run for the bus.",
                    ),
                ),
                asks=(
                    single("What race did {S} run?", "What event did {S} finish on the weekend?"),
                    when("When did {S} run {race_}?"),
                ),
            ),
            Event(
                slots={
                    "hurt": [
                        "sprained my ankle|ankle",
                        "pulled a hamstring|hamstring",
                        "hurt my knee|knee",
                        "strained my back|back",
                    ],
                    "how": [
                        "tripping over a tree root on a trail",
                        "stepping off a curb wrong",
                        "pushing too hard on hill sprints",
                        "slipping on ice",
                    ],
                },
                lines=(
                    subject(
                        "Bad news on the running front, I {hurt} {how}.",
                        "So I'm out of action for a while: {hurt} {how}.",
                        tag="detail",
                    ),
                    other(
                        "Oh no! Are you okay?", "Ouch, I'm so sorry. How long do you need to rest?"
                    ),
                    subject(
                        "The doctor says a few weeks off. I'm going stir crazy already.",
                        "I'll live, but no running for a month, which is torture.",
                    ),
                    other("Rest up and be patient with yourself.", "Take it easy, seriously."),
                ),
                asks=(
                    single("How did {S} get injured?", "What injury did {S} get while running?"),
                    when("When did {S} injure {their} {hurt_}?"),
                ),
            ),
        ),
        multi=(("What races has {S} run?", 0, "detail"),),
        traits=(
            "Running clears my head like nothing else.",
            "I'm super competitive with myself, I always want to beat my last time.",
        ),
        infer=("Would {S} likely sign up for another race?",),
        relate=(
            "I only run when someone is chasing me.",
            "My dad ran marathons in the 80s, he still talks about it.",
        ),
    ),
    Thread(
        name="reading",
        topic="that book",
        events=(
            Event(
                slots={
                    "book": [
                        "'The Silent Orchard'|'The Silent Orchard'",
                        "'A Map of Small Things'|'A Map of Small Things'",
                        "'The Glass Ferry'|'The Glass Ferry'",
                        "'Winter at Hollow Creek'|'Winter at Hollow Creek'",
                        "'Salt and Starlight'|'Salt and Starlight'",
                        "'The Clockmaker's Daughter'|'The Clockmaker's Daughter'",
                        "'Letters from the Lighthouse'|'Letters from the Lighthouse'",
                    ],
                    "plot": [
                        "a woman who restarts her life after a divorce",
                        "two sisters during the war",
                        "a chess prodigy from a tiny village",
                        "an astronaut stranded on Mars",
                        "a family running a failing bakery",
                        "a detective who can't remember faces",
                        "a boy who befriends an old sailor",
                    ],
                },
                lines=(
                    subject(
                        "I started {book} on the train, I can't put it down.",
                        "I'm reading {book} right now, someone at work recommended it.",
                        tag="news",
                    ),
                    other(
                        "What's it about?",
                        "Ooh, I haven't heard of it. What's the story?",
                        "Any good? What's it about?",
                    ),
                    subject(
                        "It's about {plot}. It made me cry twice already.",
                        "{Plot}, basically. It's so well written.",
                        tag="detail",
                    ),
                    other(
                        "Adding it to my list.",
                        "Lend it to me when you're done?",
                        "Sounds like exactly your kind of book.",
                    ),
                ),
                asks=(
                    single(
                        "What book is {S} reading about {plot}?",
                        "Which book about {plot} did {S} start?",
                        ev=("news", "detail"),
                    ),
                    single("What is {book_}, the book {S} was reading, about?", ev=("detail",)),
                    when("When did {S} start reading {book_}?", ev=("news",)),
                ),
            ),
        ),
        multi=(("What books has {S} read?", 0, "news"),),
        traits=(
            "Books got me through some really hard years, I always have one with me.",
            "I read before bed every night, no exceptions.",
        ),
        infer=("Would {S} likely join a book club?",),
        relate=(
            "I haven't finished a book since high school, honestly.",
            "My book club only talks about wine, we never discuss the book.",
        ),
    ),
    Thread(
        name="travel",
        topic="the trip",
        events=(
            Event(
                slots={
                    "city": [
                        "Lisbon",
                        "Kyoto",
                        "Reykjavik",
                        "Prague",
                        "Vancouver",
                        "Cape Town",
                        "Mexico City",
                        "Edinburgh",
                    ],
                    "best": [
                        "a food tour through tiny side streets",
                        "the old castle on the hill",
                        "a boat ride at sunset",
                        "the hot springs outside town",
                        "a night market full of street food",
                        "a free walking tour with a hilarious guide",
                    ],
                },
                lines=(
                    subject(
                        "I'm back from {city}! Still a bit jet-lagged.",
                        "Just got home from a week in {city}.",
                        tag="news",
                    ),
                    other(
                        "How was it? What was the best part?",
                        "Welcome back! What did you love most?",
                        "Ooh, tell me everything!",
                    ),
                    subject(
                        "Honestly {best}. I'd go back just for that.",
                        "The highlight was {best}, hands down.",
                        tag="detail",
                    ),
                    other(
                        "I've always wanted to go there.",
                        "Okay, adding it to my bucket list.",
                        "Sounds like a dream trip.",
                    ),
                ),
                asks=(
                    single(
                        "What was {S}'s favorite part of the trip to {city}?",
                        "Which city did {S} visit where the highlight was {best}?",
                        ev=("news", "detail"),
                    ),
                    when("When did {S} come back from {city}?", ev=("news",)),
                ),
            ),
        ),
        multi=(("What cities has {S} traveled to?", 0, "news"),),
        traits=(
            "Traveling alone taught me more about myself than anything else.",
            "I'd spend every penny on plane tickets if I could.",
        ),
        infer=("Would {S} likely take a job that involves a lot of travel?",),
        relate=(
            "I haven't taken a real vacation in three years.",
            "My parents went there on their honeymoon!",
        ),
    ),
    Thread(
        name="garden",
        topic="the garden",
        events=(
            Event(
                slots={
                    "plant": [
                        "tomatoes|tomatoes",
                        "sunflowers|sunflowers",
                        "strawberries|strawberries",
                        "chili peppers|peppers",
                        "basil and mint|herbs",
                        "zucchini|zucchini",
                    ],
                    "news": [
                        "the first ones finally came up|finally came up",
                        "something is eating all the leaves|were being eaten by something",
                        "we had our first harvest|gave a first harvest",
                        "they're taller than me now|had grown taller than {them}",
                    ],
                },
                lines=(
                    other(
                        "How's the garden doing?",
                        "Are your plants still alive, ha?",
                        "Any news from the garden?",
                    ),
                    subject(
                        "The {plant} are my pride and joy, {news}.",
                        "Oh, the {plant}! {News}.",
                        tag="detail",
                    ),
                    other("Ha, I love that.", "You have such a green thumb.", "Save me a few!"),
                ),
                asks=(
                    single(
                        "What is {S} growing in {their} garden?",
                        "What did {S} say about the {plant_}?",
                    ),
                    when("When did {S} say {their} {plant_} {news_}?"),
                ),
            ),
            Event(
                slots={
                    "project": [
                        "repainted the whole living room sage green|repaint the living room",
                        "built a bookshelf from scratch|build a bookshelf",
                        "tiled the bathroom ourselves|tile the bathroom",
                        "turned the garage into a little studio|turn the garage into a studio",
                    ]
                },
                lines=(
                    subject(
                        "Weekend project update: we {project}.",
                        "So we finally {project}! Took forever.",
                        tag="detail",
                    ),
                    other(
                        "Look at you two, so handy.",
                        "Wow, pictures please!",
                        "That sounds like a lot of work.",
                    ),
                ),
                asks=(
                    single(
                        "What home project did {S} finish?",
                    ),
                    when("When did {S} {project_}?"),
                ),
            ),
        ),
        multi=(("What has {S} grown in {their} garden?", 0, "detail"),),
        traits=(
            "Getting my hands in the dirt is so grounding for me.",
            "I love making things with my own hands, I hate paying someone to do it.",
        ),
        infer=("Would {S} likely enjoy a woodworking workshop?",),
        relate=(
            "I killed a cactus. A cactus!",
            "My grandma had the biggest vegetable garden, I miss her tomatoes.",
        ),
    ),
    Thread(
        name="family",
        topic="your family",
        events=(
            Event(
                slots={
                    "rel": [
                        "my sister|{their} sister",
                        "my brother|{their} brother",
                        "my cousin|{their} cousin",
                        "my best friend from college|{their} best friend",
                    ],
                    "wed": [
                        "on a boat|on a boat",
                        "in a barn in the countryside|in a barn",
                        "on the beach at sunset|on a beach",
                        "in our old high school gym|in a high school gym",
                    ],
                },
                lines=(
                    subject(
                        "Big news: {rel} is getting married!",
                        "{Rel} just got engaged, and I'm the maid of honor... or best person, ha.",
                        tag="news",
                    ),
                    other(
                        "Oh wow, congrats to them! Where's the wedding?",
                        "Yay! When and where?",
                        "That's so exciting! Big wedding?",
                    ),
                    subject(
                        "They want to do it {wed}, which is very them.",
                        "Apparently {wed}. I have no idea how that's going to work.",
                        tag="detail",
                    ),
                    other("That sounds so romantic.", "Ha, sounds like a memorable one."),
                ),
                asks=(
                    single(
                        "Where is {S}'s {rel_} getting married?",
                        "Who close to {S} is getting married {wed_}?",
                        ev=("news", "detail"),
                    ),
                    when("When did {S} share that {their} {rel_} got engaged?", ev=("news",)),
                ),
            ),
            Event(
                slots={
                    "who": ["my mom|mom", "my dad|dad", "my grandma|grandma", "my aunt|aunt"],
                    "did": [
                        "we baked the family apple pie together",
                        "my whole kitchen got reorganized without anyone asking me",
                        "we looked through old photo albums all night",
                        "we drove out to the town where I grew up",
                    ],
                },
                lines=(
                    subject(
                        "{Who} came to stay with us for a few days.",
                        "{Who} visited last weekend, which was lovely and a little chaotic.",
                        tag="news",
                    ),
                    other(
                        "Aww, that's nice. What did you two do?",
                        "How was the visit?",
                        "Oh fun, did you do anything special?",
                    ),
                    subject(
                        "Mostly relaxed, but {did}.", "Honestly the best part: {did}.", tag="detail"
                    ),
                    other("That's really sweet.", "I love that.", "Family time is the best."),
                ),
                asks=(
                    single(
                        "What did {S} do when {their} {who_} visited?",
                    ),
                    when("When did {S}'s {who_} come to visit?", ev=("news",)),
                ),
            ),
        ),
        multi=(("Who in {S}'s family has visited {them}?", 1, "news"),),
        traits=(
            "Family is everything to me, I call my mom almost every day.",
            "I grew up with a really close family, holidays were always loud.",
        ),
        infer=("Would {S} likely host a big holiday dinner?",),
        relate=(
            "My family only talks in the group chat, and it's just memes.",
            "My brother and I haven't talked in months, it's complicated.",
        ),
    ),
    Thread(
        name="group",
        topic="the group",
        events=(
            Event(
                slots={
                    "group": [
                        "a support group for caregivers|a caregivers support group",
                        "a new parents meetup|a new parents meetup",
                        "a grief support group|a grief support group",
                        "a writers' circle at the library|a writers' circle",
                        "a mental health peer group|a peer support group",
                    ],
                    "felt": [
                        "so powerful, I didn't expect to cry",
                        "really comforting, everyone just got it",
                        "a bit awkward at first but then great",
                        "exactly what I needed this month",
                    ],
                },
                lines=(
                    subject(
                        "I went to {group} for the first time yesterday.",
                        "I finally worked up the courage to go to {group} this week.",
                        tag="news",
                    ),
                    other(
                        "That's a big step. How was it?",
                        "Proud of you. How did it feel?",
                        "Oh wow, how did it go?",
                    ),
                    subject("It was {felt}.", "Honestly? {Felt}.", tag="detail"),
                    other(
                        "I'm really glad you went.",
                        "That takes real courage, {N}.",
                        "I hope you keep going.",
                    ),
                ),
                asks=(
                    single(
                        "How did {S} feel after going to {group_}?",
                        "What did {S} think of {group_}?",
                        ev=("news", "detail"),
                    ),
                    when("When did {S} go to {group_}?", ev=("news",)),
                ),
            ),
            Event(
                slots={
                    "talk": [
                        "my own story|{their} own story",
                        "how I got through a really dark year|getting through a dark year",
                        "what helped me when I was struggling|what helped {them}",
                    ],
                    "crowd": [
                        "about thirty people",
                        "a small room of maybe ten",
                        "a whole auditorium of students",
                    ],
                },
                lines=(
                    subject(
                        "I gave a talk at the group meeting about {talk}.",
                        "They asked me to speak at the community event, so I shared {talk}.",
                        tag="detail",
                    ),
                    other(
                        "Wow, that's brave. How many people were there?",
                        "How did it go?",
                        "That must have been nerve-wracking.",
                    ),
                    subject(
                        "{Crowd}. A few people came up afterwards to thank me.",
                        "There were {crowd}. My voice shook, but I did it.",
                        tag="answer",
                    ),
                    other("That's so inspiring.", "You're really making a difference, you know."),
                ),
                asks=(
                    single(
                        "What did {S} talk about at the group meeting?",
                    ),
                    when("When did {S} give a talk about {talk_}?"),
                ),
            ),
        ),
        multi=(("What groups or meetings has {S} gone to?", 0, "news"),),
        traits=(
            "Talking to people who understand has changed my life, I mean that.",
            "I used to keep everything inside, now I try to share.",
        ),
        infer=("Would {S} likely mentor someone going through a hard time?",),
        relate=(
            "I'm terrible at opening up, I just make jokes.",
            "My friend runs a group like that, she says it helps a lot.",
        ),
    ),
    Thread(
        name="crafts",
        topic="pottery",
        events=(
            Event(
                slots={
                    "made": [
                        "a set of lopsided bowls|bowls",
                        "a mug with a handle that actually works|a mug",
                        "a little vase for the kitchen|a vase",
                        "a plate with my dog's paw print on it|a plate",
                        "a tiny planter shaped like a frog|a planter",
                    ],
                    "glaze": [
                        "a deep ocean blue",
                        "a speckled white",
                        "a rusty orange",
                        "a mossy green",
                    ],
                },
                lines=(
                    subject(
                        "Pottery class was so fun this week.",
                        "I was at the pottery studio again on Thursday night.",
                    ),
                    other(
                        "What did you make this time?",
                        "Ooh, did anything survive the kiln?",
                        "Nice! Made anything good?",
                    ),
                    subject(
                        "{Made}, glazed in {glaze}. Not perfect, but I love it.",
                        "{Made}! I picked {glaze} for the glaze.",
                        tag="detail",
                    ),
                    other("Ha, lopsided is charming.", "I want one!", "That sounds adorable."),
                ),
                asks=(
                    single("What did {S} make in pottery class?", "What did {S} glaze in {glaze}?"),
                    when("When did {S} make {made_}?"),
                ),
            ),
        ),
        multi=(("What has {S} made in pottery class?", 0, "detail"),),
        traits=(
            "Working with clay is the only time my phone stays in my bag.",
            "I love making things people can actually use.",
        ),
        infer=("Would {S} likely enjoy a craft fair?",),
        relate=(
            "I tried pottery once and the clay flew off the wheel.",
            "My coworker sells ceramics on the side, they're gorgeous.",
        ),
    ),
    Thread(  # what the other person gives or tells them: evidence said by the one not named
        name="from_friend",
        topic="that",
        events=(
            Event(
                slots={
                    "gift": [
                        "a scented candle that smells like pine|a scented candle",
                        "a handmade mug|a mug",
                        "a book of poems|a book of poems",
                        "a tiny succulent in a teacup|a succulent",
                        "the fuzziest socks in existence|fuzzy socks",
                        "a set of vintage postcards|vintage postcards",
                    ]
                },
                lines=(
                    other(
                        "Happy birthday, {N}!! I mailed you {gift}, I saw it and thought of you.",
                        "Happy birthday!! Check your mailbox, I sent you {gift}.",
                        tag="detail",
                    ),
                    subject(
                        "Aww, you didn't have to! Thank you, it's perfect.",
                        "You're the sweetest, I love it already.",
                    ),
                ),
                asks=(
                    single(
                        "What birthday present was {S} sent?",
                        "What did {S} get in the mail for {their} birthday?",
                    ),
                    when("When was {S}'s birthday?"),
                ),
            ),
            Event(
                slots={
                    "show": [
                        "'Northern Harbor'|'Northern Harbor'",
                        "'The Last Orchard'|'The Last Orchard'",
                        "'Kitchen Confidential Live'|'Kitchen Confidential Live'",
                        "'Moon Over Maple Street'|'Moon Over Maple Street'",
                        "'The Quiet Detective'|'The Quiet Detective'",
                    ],
                    "about": [
                        "a family of fishermen in Maine",
                        "two rival bakers",
                        "a small-town detective who hates crime",
                        "a widow who opens a bookshop",
                        "astronauts training for a mission",
                    ],
                },
                lines=(
                    other(
                        "Okay, you have to watch {show}. It's about {about}, you'll love it.",
                        "New obsession: {show}, a show about {about}. Watch it so we can talk about it!",
                        tag="detail",
                    ),
                    subject("Adding it to my list right now.", "Ha, fine, I'll start it tonight."),
                ),
                asks=(
                    single(
                        "What show was {S} told to watch?",
                        "Which show about {about} was recommended to {S}?",
                    ),
                ),
            ),
        ),
        multi=(("What shows have been recommended to {S}?", 1, "detail"),),
    ),
]


DATED: dict[str, tuple[tuple[str, int, str], ...]] = {
    # Questions pinned to a month ("{when}": "March 2025") about one strand: (text, event index,
    # evidence tag). Their evidence is every telling of that event whose events happened in that
    # month, whenever it was told ("Last month I ran..."); bench/dialogue_set.py also asks them
    # "as of" a month with the strand's ``multi`` questions.
    "painting": (("What did {S} paint in {when}?", 0, "detail"),),
    "camping": (("Where did {S} go camping in {when}?", 0, "detail"),),
    "kids": (
        ("Where did {S} take {their} kids in {when}?", 1, "detail"),
        ("What did {S}'s kids achieve in {when}?", 0, "detail"),
    ),
    "pet": (("What pet did {S} adopt in {when}?", 0, "news"),),
    "job": (("What was {S} leading at work in {when}?", 2, "detail"),),
    "studies": (("What course did {S} sign up for in {when}?", 0, "detail"),),
    "volunteer": (("What did {S} do as a volunteer in {when}?", 0, "detail"),),
    "music": (
        ("What song was {S} practicing in {when}?", 0, "detail"),
        ("Which band did {S} see live in {when}?", 1, "detail"),
    ),
    "cooking": (("What dish did {S} cook in {when}?", 0, "detail"),),
    "running": (("What race did {S} run in {when}?", 0, "detail"),),
    "reading": (("What book did {S} start reading in {when}?", 0, "news"),),
    "travel": (("Which city did {S} travel to in {when}?", 0, "news"),),
    "garden": (("What was growing in {S}'s garden in {when}?", 0, "detail"),),
    "family": (("Who in {S}'s family came to stay in {when}?", 1, "news"),),
    "group": (("What group or meeting did {S} go to in {when}?", 0, "news"),),
    "crafts": (("What did {S} make in pottery class in {when}?", 0, "detail"),),
    "from_friend": (("What show was recommended to {S} in {when}?", 1, "detail"),),
}

RETOLD = (
    # How news is told weeks after it happened: (phrase, days before the telling; None: a day of
    # the previous calendar month), with weights. The phrase replaces the time words of the
    # news line ("yesterday", "this weekend", "on Saturday") or opens it.
    ("last month", None, 0.4),
    ("two weeks ago", 14, 0.2),
    ("three weeks ago", 21, 0.15),
    ("last week", 7, 0.15),
    ("yesterday", 1, 0.1),
)


# -- the glue of any conversation -------------------------------------------------------------------

GREET = (
    "Hey {N}! How's your week going?",
    "Hi {N}, long time no talk! What's new with you?",
    "{N}! Finally some free time. How are you?",
    "Morning {N}! Got a minute to chat?",
    "Hey {N}, it's been a crazy couple of days. How about you?",
    "Hi hi! How are things, {N}?",
    "Hey you. Sorry I went quiet, life got busy. How have you been?",
    "Good evening {N}! What have you been up to?",
)
GREET_BACK = (
    "Hey {N}! Good to hear from you. Busy as always, but good.",
    "Hi! I'm alright, just tired. How about you?",
    "Oh hey! Things are pretty good here, actually.",
    "Hi {N}! Honestly a bit of a whirlwind, but I'm hanging in there.",
    "Hey! Always time for you. What's up?",
    "Doing okay! Lots going on. You first, though.",
    "Hey {N}, so glad you messaged. It's been a week.",
    "Hi! Not bad at all. The weather finally turned nice here.",
)
CLOSE = (
    "Okay, I should get going, but this was really nice. Talk soon!",
    "I have to make dinner, catch you later {N}!",
    "Gotta run, but let's chat again soon.",
    "Alright, bedtime for me. Good night {N}!",
    "I need to get back to work, ugh. Talk later!",
    "Let's catch up again next week, okay?",
)
CLOSE_BACK = (
    "Bye! Take care of yourself.",
    "Talk soon, {N}!",
    "Good night! Sleep well.",
    "Same time next week then. Bye!",
    "Take care, {N}! Always great talking to you.",
    "Bye bye! Say hi to everyone for me.",
)
REACT = (
    "That's awesome, {N}!",
    "Wow, I love that.",
    "That sounds amazing.",
    "So cool, I'm really happy for you.",
    "Aww, that's wonderful!",
    "Good for you, seriously.",
    "Ha, you always find the best things to do.",
    "Oh wow, that must have felt good.",
    "That's so nice to hear, {N}.",
    "You deserve it.",
    "I'm so happy for you!",
    "Okay, that made my day.",
)
REACT_TOPIC = (
    "You've really gotten into {topic} lately, huh?",
    "I love how much {topic} means to you.",
    "Sounds like {topic} is really good for you.",
    "Every time you talk about {topic} you light up, {N}.",
    "I should take a page out of your book with {topic}.",
)
SMALL_TALK = (
    (
        "Did you watch anything good lately?",
        "Just rewatching an old sitcom, I need something easy right now.",
    ),
    (
        "How's the weather over there? It's been pouring here all day.",
        "Sunny but freezing. I'll take it, though.",
    ),
    ("I'm so tired today, I barely slept.", "Same, my neighbor's party went until 3 a.m."),
    ("Work has been a lot this week.", "Ugh, I feel that. Hang in there."),
    ("Do you have plans for the weekend?", "Nothing much, just laundry and maybe a movie."),
    (
        "I had the best coffee this morning, a new place opened near me.",
        "Ooh, I need the name, I'm always looking for good coffee.",
    ),
    (
        "Traffic this morning was unreal.",
        "That's why I've started working from home whenever I can, ha.",
    ),
    ("Have you eaten yet?", "Just had leftovers, very glamorous."),
    (
        "I've been trying to drink more water, it's harder than it sounds.",
        "Ha, I keep buying fancy bottles and forgetting them.",
    ),
    ("My phone screen cracked again.", "Oh no, you need a better case, seriously."),
    ("It's been such a long week.", "Tell me about it. I'm counting down to Friday."),
    (
        "Did you see the news about the new park downtown?",
        "Yes! It looks great, I want to check it out.",
    ),
    (
        "I finally cleaned out my closet.",
        "I should do that too, I have clothes from ten years ago in there.",
    ),
    ("I think I'm coming down with a cold.", "Drink some tea and go to bed early, okay?"),
    (
        "The power went out here for like three hours last night.",
        "Yikes, at least you had an excuse to go to bed early.",
    ),
    (
        "I started a new show and I'm already hooked.",
        "Don't tell me, let me guess... another murder mystery?",
    ),
    (
        "Do you ever just sit in the car for a few minutes before going inside?",
        "All the time, it's my only quiet moment.",
    ),
    ("I can't believe it's already this time of year.", "Right? Time is flying."),
    ("I ordered way too much takeout this week.", "No judgement, cooking every day is exhausting."),
    (
        "My sleep schedule is a mess.",
        "Mine too. I keep saying I'll go to bed earlier and then I don't.",
    ),
)
FILLER = (
    "Haha, right?",
    "Totally.",
    "Oh for sure.",
    "Ha, yeah.",
    "Wait, really?",
    "That's wild.",
    "Same here, honestly.",
    "Anyway, how about you?",
    "I know, right?",
    "Ha, that's so you.",
    "Okay, fair.",
    "Hmm, good point.",
)
