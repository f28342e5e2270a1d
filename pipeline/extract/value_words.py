"""The words and stops a value slot is read with: where a value ends, and which words name
nothing (pronouns, vague nouns, light verbs, generic places).

Data only; `pipeline.extract.values` reads a slot's span with them.
"""

from __future__ import annotations

import re

_FLAGS = re.IGNORECASE


def word_set(text: str) -> frozenset[str]:
    """The words of a list written as one string."""
    return frozenset(text.split())


def _words_in_order(text: str) -> list[str]:
    return text.split()


ONE_TO_TWENTY = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
NUMBER_WORDS = {word: index for index, word in enumerate(_words_in_order(ONE_TO_TWENTY))} | {
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
}
COUNT = (
    r"(?:\d[\d,.]*%?|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|some|"
    r"several|a\s+few|a\s+couple\s+of|a\s+couple|many|lots\s+of|a\s+lot\s+of|multiple)"
)
CHANGE = (
    r"(?:just\s+)?(?:changed|increased|raised|extended|adjusted|cut|moved|lowered|reduced|"
    r"updated|switched|bumped|upped|dropped|decreased|shifted|pushed|set)(?:\s+(?:it|this))?"
)
# A string value stops where a new phrase starts: punctuation, a conjunction, a new subject, an
# adverb ("quite a bit", "as well"), or a verb of its own ("black sabbath doesn't mean ...").
CLAUSE_STOP = (
    r"\s*(?:[;!?()\"…—–]|,(?!\d{3})|:(?!\d\d)|\.{2,}|-{2,})|\s+-\s|\.(?:\s|$)|\s+(?:"
    r"(?:is|are|was|were|does|do|did|has|have|had|ca|wo|would|could|should)n['’]?t|"
    r"(?:in|on|at|during|for)\s+(?:my|the|our)\s+(?:(?:spare|free|own|down)\s+time|weekends?|"
    r"mornings?|evenings?|nights?|afternoons?|summers?|winters?|fall|spring|autumn|days?\s+off)|"
    r"on\s+weekends|at\s+night|and|but|or|so|because|cause|since|who|which|"
    r"that|where|when|while|if|though|although|now|currently|right\s+now|too|also|again|"
    r"anymore|lol|haha|lmao|hehe|these\s+days|nowadays|either|yet|sometimes|usually|often|"
    r"occasionally|mostly|always|every|each|all|very|really|a\s+lot|lately|today|tonight|"
    r"tomorrow|yesterday|i|i'm|im|we|you|it's|it|its|those|these|them|this|him|her|"
    r"your|like|better|more|than|then|unlike|alot|such|last|next|ago|here|there|"
    r"myself|mainly|honestly|personally|especially|instead|anyway|though|once|twice|quite|"
    r"rather|as\s+well|as\s+(?:\w+\s+)?as|(?:a\s+few|several|many)\s+times|the\s+best|the\s+most|so\s+much|a\s+bit|"
    r"is|are|was|were|am|does|has|had|will|would|could|should|must|can|cannot)\b"
)
# A possessive starts a new phrase after a noun ("I love cars my dad ...") but is the object of
# an activity ("I like walking my dog", "visit my family").
POSSESSIVES = r"|\s+(?:my|his|their|our)\b"
PREPOSITIONS = (
    r"|\s+(?:with|as|for|from|at|in|on|near|by|to|into|about|after|before|during|until)\b"
)
STOP = re.compile(CLAUSE_STOP + POSSESSIVES + PREPOSITIONS, _FLAGS)
PHRASE_STOP = re.compile(CLAUSE_STOP, _FLAGS)
SHORT_PHRASE_STOP = re.compile(CLAUSE_STOP + POSSESSIVES, _FLAGS)
# After a cut, these show that the value's sense lay elsewhere in the conversation.
RELATIVE = re.compile(r"^\s*(?:that|who|which|where)\b", _FLAGS)
THERE = re.compile(r"^\s*there\b", _FLAGS)
# "books like that", "things like these": the kind was shown earlier in the conversation.
THEIR_OWN = re.compile(r"^\s+(?:it|they|he|she|we|you)\b", _FLAGS)
COMPANION_TAIL = re.compile(r"^\s*(?:and|&)\s+(?:i|me)\s*$", _FLAGS)
# Nouns that name a kind, not a thing: with a relative clause after them, the clause says which.
KINDS = word_set("activities activity things stuff places people kinds types sorts ones folks")
# A taste narrowed right after it names what is liked: "I like sports, mostly basketball", "I
# love meat, especially steak"; a vague one by its example, "bands like Styx" (not "heavy
# metal like Slayer": that names the taste; not "walks, especially on the beach": that says
# where; not "books like that").
_NOT_NARROWER = (
    r"\s+(?!(?:on|in|at|to|when|whenever|while|where|as|once|so|if|with|for|because|cause|since|"
    r"during|after|before|until|by|around|near|"
    r"the\s+ones?|that|this|these|those|it|them|you|me|us|him|her|a\s+lot|crazy|mad|hell)\b)"
    r"(?P<rest>\S.*)$"
)
NARROWED = re.compile(
    r"^\s*(?:too|as\s+well|also)?\s*,\s*(?:especially|particularly|mostly|mainly)" + _NOT_NARROWER,
    _FLAGS,
)
EXAMPLE = re.compile(r"^\s*(?:,?\s+such\s+as|\s+like)" + _NOT_NARROWER, _FLAGS)
VAGUE_TASTES = word_set(
    "bands band movies movie films film shows books book music songs games sports food foods "
    "animals things stuff genres artists singers authors"
)
TASTE_VERB = re.compile(r"^(?:really\s+|also\s+)?(?:like|love|enjoy|adore)\s+(?:to\s+)?", _FLAGS)
TASTE_KIND = "preference"
"""The kind of attributes that hold tastes."""
# "I enjoy the challenge", "the thrill of scoring goals", "I love the food": with "the", these
# name a side of something the conversation showed (the job, the game, the place), not a taste.
ASPECTS = word_set(
    "challenge challenges experience thrill rush rest game isolation food music people view "
    "views scenery atmosphere vibe vibes idea pay hours story plot characters freedom "
    "environment process feeling energy excitement adrenaline pace company perks benefits "
    "flexibility attention part aspect parts aspects options choices selection"
)
# "I love having fun", "leisure activities", "doing activities": leisure itself, which every
# taste is, names no taste.
LEISURE = word_set(
    "fun leisure recreation recreational activity activities pastime pastimes hobby hobbies "
    "entertainment"
)
LEISURE_FILLERS = word_set("partaking taking part in of some any my as much more lots lot plenty")
# A taste that is only a given name or two names a person the speaker knows or is called, not
# a taste: "I prefer Mary Anne (to Ginger)", "I like Jake". Left out: names that are also
# places, words or a performer known by one name ("Virginia", "Grace", "Dylan", "Taylor").
GIVEN_NAMES = word_set(
    "james john robert michael william david richard joseph thomas charles christopher daniel "
    "matthew anthony donald steven paul andrew joshua kenneth kevin brian george timothy "
    "ronald edward jason jeffrey ryan jacob gary nicholas eric jonathan stephen larry justin "
    "scott brandon benjamin samuel gregory alexander patrick raymond dennis jerry tyler aaron "
    "jose adam nathan henry douglas zachary peter kyle ethan walter noah jeremy keith roger "
    "terry gerald harold sean carl arthur lawrence jesse bryan billy joe bruce gabriel logan "
    "albert willie alan juan wayne elijah randy roy vincent ralph eugene russell bobby mason "
    "philip jake mike tom bob dave steve jim chris matt dan tony nick ben sam alex joey "
    "mary patricia jennifer linda elizabeth barbara susan jessica sarah karen lisa nancy betty "
    "margaret sandra ashley kimberly donna michelle carol amanda dorothy melissa deborah "
    "stephanie rebecca sharon laura cynthia kathleen amy angela shirley anna brenda pamela "
    "nicole samantha katherine christine debra rachel carolyn janet catherine maria heather "
    "diane ruth julie olivia joyce kelly lauren christina joan evelyn judith megan andrea "
    "cheryl hannah jacqueline martha gloria teresa ann anne sara frances kathryn janice "
    "jean abigail alice judy sophia denise doris marilyn danielle beverly isabella "
    "theresa diana natalie brittany marie kayla alexis lori jen jenny kate katie beth sue liz "
    "meg marianne maryanne"
)
DEMONSTRATIVE_END = re.compile(r"\b(?:this|that|these|those)\s*$", _FLAGS)
# "the smell and taste it adds", "the energy, diversity and food of this city": the value's
# owner is a thing the conversation showed.
ITS_OWN = re.compile(
    r"^(?:(?:,\s*(?:and\s+)?|\s+(?:and|&)\s+)[\w-]+(?:\s+[\w-]+)?){0,3}\s+(?:it(?!['’])|"
    r"of\s+(?:this|these|those|that))\b",
    _FLAGS,
)
LIKE_THAT = re.compile(r"^\s+like\s+(?:that|this|those|these)\b", _FLAGS)
# An object pronoun right after a one-word value: the value was a verb and its object was
# said before ("I enjoy learning them", "I like to visit them").
PRONOUN_OBJECT = re.compile(r"^\s+(?:it|them|him|her|this|these|those)\b(?!['’])", _FLAGS)
PREPOSITION_WORDS = word_set(
    "with as for from at in on near by to into about after before during until of over"
)
ANAPHORIC_END = word_set("one ones it them")
# An activity whose object is one of these names no activity: "sing anything", "do whatever".
VAGUE_OBJECTS = word_set(
    "it this that these those them him her anything everything something nothing whatever"
)
LIST_JOINT = re.compile(
    r"\s*,\s*(?:and\s+|or\s+)?(?!(?:and|but|so|i|i'm|my|we|you|it|which|who)\b)"
    r"|\s+(?:and|or|&)\s+(?!(?:i|i'm|my|we|you|it|then|also)\b)",
    re.IGNORECASE,
)
# A preposition or an article left at the end by a cut ("seeing the (before and afters)").
DANGLING = re.compile(
    r"(?:\s+(?:with|as|for|from|at|in|on|to|into|about|of|by|after|before|until|around|"
    r"alongside|beside|behind|near|without|through|across|during|over|under|a|an|the))+$",
    _FLAGS,
)
# "a full time student": how much of the time says nothing of what
DETERMINER = re.compile(
    r"^(?:(?:a|an|the|some|any)\s+(?:(?:full|part)[\s-]time\s+)?|(?:full|part)[\s-]time(?:\s+|$))",
    _FLAGS,
)
# Values that name nothing: pronouns, vague nouns, function words.
EMPTY_VALUE = word_set(
    "it its it's this that these those them they him her his hers he she you your yours me my "
    "mine myself yourself we us our ours one ones thing things stuff idea ideas way kind sort "
    "lot lots bit part sound look fact time times one home here there now then what which who "
    "how why when where something anything everything nothing someone anyone everyone nobody "
    "all both each other others more most less much many few well so very too not no yes ok "
    "okay sure just only also even still really too to of a an the and or but for with at in "
    "on by from night nights day days week weeks month months year years work job is are was "
    "were has had little morning "
    "evening afternoon mornings evenings weekends weekend shifts shift their theirs big huge "
    "great good new some any whatever variety"
)
PARTICLES = word_set("up out on off over around back down away")
LIGHT_VERBS = word_set(
    "doing being having getting going spending playing making taking seeing trying using do "
    "be have get go make take see try use watching living knowing play listening watch "
    "helping learning meeting finding keeping giving buying help come spend listen spoil"
)
GENERIC_PLACES = word_set(
    "town city village country countryside area place house apartment flat home suburb "
    "suburbs state states world farm neighborhood neighbourhood region island coast mountains "
    "woods middle same"
)
# These make a place generic only with a generic place or alone ("a small town", "big"), not
# in a name ("New York", "Little Rock", "Old Saybrook").
PLACE_ADJECTIVES = word_set(
    "big small nice new old little quiet north south east west northern southern eastern western"
)
# Words that follow "I'm" or "my name is" without being a name.
NOT_NAMES = word_set(
    "good fine great well ok okay doing tired happy sad new back here sorry glad excited so "
    "just not pretty very really busy bored from in at on going trying looking thinking "
    "feeling sure also still actually too about kind sort getting having being all alright "
    "awesome cool wonderful amazing lucky blessed sick hungry ready done interested curious "
    "afraid scared nervous worried late early alone single married retired hoping planning "
    "working living currently originally far one worker"
)
# A whole first word: "Amsterdam", "Anna" and "Thessaloniki" are names.
NAME_FIRST_BAD = re.compile(
    r"^(?:(?:a|an|the|this|that|my|your|his|her|our|their|its|some|any|every|no|one|several|"
    r"many|few|most|all|both|each|other)(?![\w'’-])|\d)",
    _FLAGS,
)
NUMBER = re.compile(
    r"^(?:about\s+|around\s+|only\s+|almost\s+)?[$€£]?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.,]\d)"
)


# "I'm a great cook", "a terrible singer": a judgement of a skill, not an occupation.
JUDGING = word_set(
    "good great bad terrible awful decent excellent amazing awesome big huge better best worse "
    "worst pretty fine poor lousy natural born"
)
# "an avid fisherman", "an amateur photographer": a pastime, not an occupation.
PASTIME = word_set("avid amateur keen hobby aspiring wannabe")
# "my brother in law": another relative than the term.
IN_LAW = re.compile(r"^\s*-?\s*in[\s-]+laws?\b", re.IGNORECASE)
# "making my own (what was said before)": what is owned was named earlier; "on my own" and
# "music of my own" are not.
OWN_END = re.compile(r"(?<!\bon)(?<!\bby)(?<!\bof)\s+(?:my|our|their|your)\s+own$", re.IGNORECASE)
# "places close (to nature)": a cut inside its phrase.
CUT_NEARNESS = word_set("close closer next")
PASTIME_AFTER = re.compile(
    r"^\s*(?:by\s+hobby|as\s+a\s+hobby|for\s+fun|in\s+my\s+(?:spare|free)\s+time)\b",
    re.IGNORECASE,
)


# "my fur babies" are pets, not children.
FIGURATIVE = word_set("fur furry")
# A breed names its animal: "a Labrador Retriever and a Pitbull" are dogs. The breed itself is
# not kept (the personal catalogue has no place for it).
BREEDS = {
    "dog": word_set(
        "labrador retriever pitbull pittie poodle beagle bulldog terrier chihuahua "
        "dachshund husky corgi collie rottweiler doberman greyhound spaniel pug mastiff schnauzer "
        "shih-tzu shihtzu maltese pomeranian yorkie doodle "
        "goldendoodle labradoodle dalmatian"
    ),
    "cat": word_set("siamese persian tabby ragdoll sphynx bengal calico"),
}
# Before a count that comes first ("{value} words"), these make it a bound or a change of
# the count, not the count: "at least 80% accuracy", "I cut 1,200 words", "draw two cards".
NOT_THE_COUNT = re.compile(
    r"\b(?:at\s+least|at\s+most|up\s+to|more\s+than|less\s+than|fewer\s+than|over|under|"
    r"cut|cutting|removed?|deleted?|lost|lose|draw|drew|drawing|trimmed|dropped|by)\s*$",
    re.IGNORECASE,
)
