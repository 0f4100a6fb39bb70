"""An offline customer that talks: deterministic, no LLM, every domain.

:class:`~tau2_gym.players.users.scripted.OracleUser` ends the conversation at the agent's first question, so a
policy that says goodbye at once scores as well as one that asks and acts. :class:`TalkingUser` holds a
conversation instead, from the task alone:

- it opens with the reason for the call in the first person (free-form instructions: their quoted opening line,
  else the sentences saying what the customer wants);
- it answers questions from ``known_info`` (user id, name, e-mail, zip code, phone, address, reservation and
  order ids; the payment method its gold actions use), says what ``unknown_info`` says it does not know, and
  answers other questions with the task's own sentences ("if the agent asks about X, say Y" first);
- it confirms a proposed write that the gold actions take or that it called about, and declines other writes;
- it performs its own tools when asked: read-only ones on any request, writing ones only while they are pending
  user-side gold actions -- named by tool name, asked for in words (telecom's device actions), or recommended by
  a distinctive argument (a card's name); a change the task does not need is declined in words;
- it stops with ``###STOP###`` when the agent wraps up or says goodbye (``###TRANSFER###`` when transferred),
  after ``patience`` replies in a row that moved nothing, or after ``max_turns`` messages.

It never acts unasked, so a policy that ends at once scores exactly the do-nothing baseline. Like every
simulator here it is stateless: each reply is a function of the request's task and the user's view, so one
instance serves any number of episodes and the same conversation always gets the same reply.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Optional

from tau2_gym.core.domain import get_domain_spec
from tau2_gym.core.messages import STOP, TRANSFER, USER_STOP_TOKENS, ToolCall, UserMessage
from tau2_gym.core.tasks import Action, StructuredUserInstructions, Task
from tau2_gym.players.users.base import UserSimulator, UserTurnRequest
from tau2_gym.players.users.scripted import user_gold_actions

__all__ = ["TalkingUser", "TaskFacts", "first_person", "task_facts"]

# ----------------------------------------------------------------------------------------------- the task's text

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ME_BEFORE = {
    "to", "for", "with", "at", "tell", "told", "give", "gave", "help", "helps", "let", "call", "asked", "ask",
    "asks", "of", "about", "by", "from", "send", "sent", "offer", "offers", "offered", "than", "remind", "contact",
    "gives", "get", "gets", "show", "shows", "cost", "costs", "charge", "charged", "lets", "make", "makes",
    "assist", "connect", "transfer", "refund", "pay", "owe", "owes", "email", "into", "on", "upon", "against",
}  # fmt: skip
_SWAPS = [
    (re.compile(r"\*{0,2}your character(?: is|:)\*{0,2}\s*(?:you are\s+)?", re.I), "I am "),
    (re.compile(r"\byou are\b", re.I), "I am"),
    (re.compile(r"\byou're\b", re.I), "I'm"),
    (re.compile(r"\byou were\b", re.I), "I was"),
    (re.compile(r"\byou've\b", re.I), "I've"),
    (re.compile(r"\byou'll\b", re.I), "I'll"),
    (re.compile(r"\byou'd\b", re.I), "I'd"),
    (re.compile(r"\byourself\b", re.I), "myself"),
    (re.compile(r"\byours\b", re.I), "mine"),
    (re.compile(r"\byour\b", re.I), "my"),
    (re.compile(r"\byou mobile\b", re.I), "my mobile"),  # a typo in telecom's reason for call
]
_YOU = re.compile(r"\byou\b", re.I)
_THANKS = re.compile(r"\b(thank )you\b", re.I)
_THANKS_MARK = re.compile("\u2063")  # an invisible separator keeps "thank you" out of the swaps
_OBJECT_NEXT = {"the", "a", "an", "any", "some", "all", "more", "back", "up", "out", "in", "with", "for", "to"}


def first_person(text: str) -> str:
    """The task's second-person text as the customer would say it ("You want to cancel your ..." -> "I want to
    cancel my ..."): whole-word pronoun swaps; a bare "you" becomes "me" after a preposition or verb of address."""
    for pattern, repl in _SWAPS:
        text = pattern.sub(lambda m, r=repl: _case(m.group(0), r), text)

    def you(m: re.Match) -> str:
        before = text[: m.start()].rstrip().rsplit(None, 1)
        prev = before[-1].lower().strip(",;:") if before else ""
        after = re.match(r"\s*([\w$]+|[.,;:!?)]|$)", text[m.end() :])
        nxt = after.group(1).lower() if after else ""
        obj = prev in _ME_BEFORE or nxt in _OBJECT_NEXT or nxt[:1].isdigit() or nxt[:1] in "$.,;:!?)"
        return _case(m.group(0), "me" if obj or nxt == "" else "I")

    return _THANKS_MARK.sub("you", _YOU.sub(you, _THANKS.sub(lambda m: m.group(1) + _THANKS_MARK.pattern, text)))


def _case(src: str, repl: str) -> str:
    return repl[0].upper() + repl[1:] if src[:1].isupper() else repl


def _sentences(text: Optional[str]) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


# ----------------------------------------------------------------------------------------------- what it knows

# topic -> what in the agent's text asks for it
_TOPICS: dict[str, re.Pattern] = {
    "user_id": re.compile(r"user ?-?id|user_id|userid|account id|customer id|user ?name|profile id", re.I),
    "request": re.compile(
        r"how (?:can|may) i (?:help|assist)|what (?:can i do|brings you|are you looking for|do you need)|"
        r"what (?:you are|you're) looking for|what (?:can|may) i (?:help|assist) you with|reason for (?:your )?call",
        re.I,
    ),
    "name": re.compile(r"\bname\b", re.I),
    "email": re.compile(r"e-?mail", re.I),
    "zip": re.compile(r"\bzip|postal code|post code", re.I),
    "phone": re.compile(r"phone number|mobile number|cell number|number on (?:the|your) account", re.I),
    "address": re.compile(r"(?<!e-mail )(?<!email )\baddress\b", re.I),
    "reservation": re.compile(
        r"reservation|confirmation (?:number|code|id)|booking (?:id|number|reference|code)", re.I
    ),
    "order": re.compile(r"\border(?:s)? ?(?:id|number|#)|which order|order ids?\b", re.I),
    "payment": re.compile(
        r"payment method|pay (?:with|using|by)|how would you like to pay|which card|refund (?:to|the)|"
        r"which payment|gift card or|paypal or|credit card or",
        re.I,
    ),
}  # fmt: skip
# topic -> words that find it in known_info / unknown_info / the task's other text
_TOPIC_WORDS = {
    "request": (),
    "user_id": ("user id", "user_id", "userid"),
    "name": ("name",),
    "email": ("email", "e-mail"),
    "zip": ("zip",),
    "phone": ("phone",),
    "address": ("address", "live in", "living in"),
    "reservation": ("reservation", "confirmation", "booking", "trip", "flight"),
    "order": ("order",),
    "payment": ("pay", "paypal", "gift card", "credit card", "giftcard", "refund"),
}
_LABELS = {
    "request": "request",
    "user_id": "user id",
    "name": "name",
    "email": "email",
    "zip": "zip code",
    "phone": "phone number",
    "address": "address",
    "reservation": "reservation",
    "order": "order",
    "payment": "payment method",
}

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"\b\d{3}-\d{3}-\d{4}\b")
_ZIP = re.compile(r"(?<![\d-])\d{5}(?![\d-])")
_ID_TOKEN = re.compile(r"\b[a-z]+(?:_[a-z]+)+_\d{3,}\b")
_USER_ID = re.compile(r"user[ _]?id\s*(?:is|:|=)?\s*:?\s*['\"]?([A-Za-z0-9_]+)", re.I)
_NAME_WORD = r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?"
_FULL_NAME = rf"({_NAME_WORD}(?: (?:bin |van |de )?{_NAME_WORD})+)"
_NAME_PATTERNS = [
    re.compile(rf"\bYou(?:r)? name is\s+{_FULL_NAME}"),
    re.compile(rf"Your character:\**\s*(?:You are\s+)?{_FULL_NAME}"),
    re.compile(rf"\b(?:You are|You're|I am)\s+{_FULL_NAME}"),
    re.compile(rf"\b(?:called|named)\s+{_FULL_NAME}"),
    re.compile(rf"\b(?:You are|You're)\s+({_NAME_WORD})\b(?! by\b)"),
]
_NOT_NAMES = {"French", "The", "A", "An", "Rho", "Playing"}
_RESERVATION = re.compile(
    r"(?:reservation|confirmation)s?(?: (?:numbers?|ids?|codes?))?\s*(?:is|are|:)?\s*:?\s*([A-Z0-9]{6})\b", re.I
)
_CODE = re.compile(r"\b(?=[A-Z]*\d)(?![A-Z]{3}\d{3}\b)[A-Z0-9]{6}\b")  # a reservation code, not a flight number
_ORDER = re.compile(r"#W\d{5,}")
_ADDRESS = re.compile(r"\blive in (\d+ [^.]*?\d{5})")
_PAYMENT_KINDS = (("credit_card", "credit card"), ("gift_card", "gift card"), ("paypal", "PayPal"), ("bank", "bank"))


@dataclass
class TaskFacts:
    """What the customer can say, parsed once per task from its instructions (and, for the payment method, the
    gold actions' ``payment_method_id``)."""

    opening: str
    known: dict[str, str] = field(default_factory=dict)  # topic -> the answer sentence
    unknown: dict[str, str] = field(default_factory=dict)  # topic -> "I don't remember ..."
    sentences: list[str] = field(default_factory=list)  # the task's sentences in the first person, facts first
    recap: str = ""  # everything known, for an agent that asks nothing


def _instruction_parts(task: Task) -> tuple[str, str, str, str]:
    """(reason, known, unknown, other instructions) of structured or free-form instructions."""
    instr = task.user_scenario.instructions
    if isinstance(instr, StructuredUserInstructions):
        return instr.reason_for_call, instr.known_info or "", instr.unknown_info or "", instr.task_instructions
    text = str(instr)
    for token in USER_STOP_TOKENS:
        text = text.replace(token, "")
    return "", text, "", text


def _free_form_opening(text: str) -> str:
    """The opening of free-form instructions: a quoted opening line if the task gives one, else the sentences
    that say what the customer wants."""
    m = re.search(r"(?:Start|Opening|Open with|Begin)[^:\n]*:\**\s*[\"“](.+?)[\"”]", text)
    if m:
        return m.group(1).strip()
    goals = [
        s
        for s in _sentences(text)
        if re.search(r"\b(want|looking for|need|would like|goal is|trying to|hoping to|request)\b", s, re.I)
        and not re.search(r"\b(never|don't|do not|only|if|agent|tool|playing the role)\b", s, re.I)
    ]
    chosen = goals[:2] or _sentences(text)[:1]
    return first_person(" ".join(re.sub(r"[*#]+", "", s).strip() for s in chosen))


def _name(text: str) -> Optional[str]:
    for pattern in _NAME_PATTERNS:
        for m in pattern.finditer(text):
            name = m.group(1)
            if name.split()[0] not in _NOT_NAMES:
                return name
    return None


def task_facts(task: Task) -> TaskFacts:
    """Parse what the customer knows and does not know (robust to the phrasings of the five domains' tasks)."""
    reason, known_text, unknown_text, other = _instruction_parts(task)
    every = "\n".join((reason, known_text, other))
    known: dict[str, str] = {}

    user_id = None
    m = _USER_ID.search(known_text)
    if m and re.search(r"[\d_]", m.group(1)):
        user_id = m.group(1)
    else:
        ids = _ID_TOKEN.findall(known_text)
        user_id = ids[0] if ids else None
    if user_id:
        known["user_id"] = f"My user id is {user_id}."
    name = _name(known_text)
    if user_id and _ID_TOKEN.fullmatch(user_id):  # first_last_1234: the full name when the text gives less
        from_id = " ".join(p.capitalize() for p in user_id.split("_")[:-1])
        if name is None or (" " not in name and from_id.startswith(name + " ")):
            name = from_id
    if name:
        known["name"] = f"My name is {name}."
    emails = list(dict.fromkeys(_EMAIL.findall(known_text)))
    if emails:
        known["email"] = f"My email is {' or '.join(emails)}."
    phones = _PHONE.findall(known_text)
    if phones:
        known["phone"] = f"My phone number is {phones[0]}."
    zips = [z for z in _ZIP.findall(_PHONE.sub(" ", known_text))]
    if zips:
        known["zip"] = f"My zip code is {zips[0]}."
    m = _ADDRESS.search(known_text)
    if m:
        known["address"] = f"My address is {m.group(1)}."
    reservations = [r for r in _RESERVATION.findall(every) if r.isupper() or r.isdigit()]
    if re.search(r"reservation|confirmation|booking", every, re.I):
        reservations += _CODE.findall(every)
    reservations = list(dict.fromkeys(reservations))
    if reservations:
        known["reservation"] = f"The reservation number is {' and '.join(reservations)}."
    orders = list(dict.fromkeys(_ORDER.findall(every)))
    if orders:
        known["order"] = (
            f"The order id is {', '.join(orders)}." if len(orders) == 1 else (f"The order ids are {', '.join(orders)}.")
        )
    kinds = []
    for action in (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []:
        pid = action.arguments.get("payment_method_id")
        if isinstance(pid, str):
            kind = next((label for key, label in _PAYMENT_KINDS if pid.startswith(key)), None)
            if kind and kind not in kinds:
                kinds.append(kind)
    if kinds:
        known["payment"] = f"Please use my {' and my '.join(kinds)}."

    unknown: dict[str, str] = {}
    for sentence in _sentences(unknown_text):
        low = re.sub(r"e-?mail address", "email", sentence.lower())
        for topic, words in _TOPIC_WORDS.items():
            if topic not in unknown and any(w in low for w in words):
                unknown[topic] = first_person(sentence)

    seen: set[str] = set()
    sentences = []
    for s in _sentences(known_text) + _sentences(reason) + _sentences(other):  # facts first: they win ties
        if s not in seen and s != ".":
            seen.add(s)
            sentences.append(first_person(re.sub(r"[*#]+", "", s).strip()))
    opening = first_person(" ".join(_sentences(reason))) if reason.strip() else _free_form_opening(known_text)
    recap_topics = [t for t in ("name", "user_id", "email", "zip", "phone", "reservation", "order") if t in known]
    recap = " ".join(known[t] for t in recap_topics)
    return TaskFacts(opening=opening or "I need some help.", known=known, unknown=unknown, sentences=sentences,
                     recap=recap)  # fmt: skip


# ----------------------------------------------------------------------------------------------- what the agent says

_GOODBYE = re.compile(r"\b(good-?bye|bye|have a (?:great|nice|good|wonderful) (?:day|one|trip|evening))\b", re.I)
_SELF_PROPOSAL = re.compile(r"\b(me to|shall i|should i|i can|i will|i'll|let me|i have|i've|i am|i'm)\b", re.I)
_WRAP_UP = re.compile(
    r"anything else|is there something else|anything more i can|can i help you with anything|"
    r"that concludes|has been taken care of|all set\b|you're all set|you are all set",
    re.I,
)
_TRANSFERRING = re.compile(
    r"\b(transferr?(?:ing|ed)|(?:will|i'll|going to|let me) transfer|connect(?:ing)? you)\b.*\b(human|agent|"
    r"representative|specialist|supervisor)",
    re.I,
)
_REQUEST_CUE = re.compile(
    r"\?|\b(please|could you|can you|would you|may i|provide|tell me|share|let me know|need your|what is your|"
    r"what's your|verify|confirm your)\b",
    re.I,
)
_CONFIRM_CUE = re.compile(
    r"\b(confirm|proceed|go ahead|yes/no|\(yes\)|shall i|should i|would you like (?:me )?to|do you want (?:me )?to|"
    r"would you like|is that (?:correct|right|ok|okay)|are you sure|do you agree|okay to)\b",
    re.I,
)
_WH = re.compile(r"\b(which|what|how|when|where|who|whose)\b", re.I)  # not a yes/no question
_DONE_REPORT = re.compile(r"\b(has been|have been|successfully|is now|are now|completed|processed|done)\b", re.I)
_ACTION_VERBS = re.compile(
    r"\b(turn|toggle|enable|disable|switch|reset|reseat|remove|re-?insert|restart|reboot|grant|allow|disconnect|"
    r"set|change|make|pay|apply|submit|dismiss|power|try|go to|open|perform|do|take|put|insert|connect)\b",
    re.I,
)
# (what names it, read-only tool, writing tool): telecom's device requests in the agent's words
_DEVICE = [
    (r"status bar|signal bar", "check_status_bar", None),
    (r"speed test|internet speed|data speed", "run_speed_test", None),
    (r"network mode|network preference|preferred network|\b[45]g\b|\blte\b|network type",
     "check_network_mode_preference", "set_network_mode_preference"),
    (r"airplane|flight mode|aeroplane", "check_status_bar", "toggle_airplane_mode"),
    (r"roaming", "check_network_status", "toggle_roaming"),
    (r"data saver|data-saver|data restriction", "check_data_restriction_status", "toggle_data_saver_mode"),
    (r"wi-?fi calling", "check_wifi_calling_status", "toggle_wifi_calling"),
    (r"\bapn\b|access point", "check_apn_settings", "reset_apn_settings"),
    (r"\bvpn\b", "check_vpn_status", "disconnect_vpn"),
    (r"mobile data|cellular data|\bdata\b", "check_network_status", "toggle_data"),
    (r"wi-?fi", "check_wifi_status", "toggle_wifi"),
    (r"\bsim\b", "check_sim_status", "reseat_sim_card"),
    (r"restart|reboot|power cycle|turn (?:your|the) (?:phone|device) off", None, "reboot_device"),
    (r"permission", None, "grant_app_permission"),
    (r"\bmms\b|picture message|multimedia message", "can_send_mms", None),
    (r"network status|network connection|service status|\bsignal\b", "check_network_status", None),
    (r"payment request|\bbill\b|make (?:a|the) payment|\bpay\b", "check_payment_request", "make_payment"),
    (r"installed apps|which apps", "check_installed_apps", None),
    (r"notification", "check_notifications", "dismiss_notification"),
]  # fmt: skip
_DEVICE_RE = [(re.compile(p, re.I), read, write) for p, read, write in _DEVICE]
# what an agent may call the verb a writing tool's name starts with
_SYNONYMS = {
    "update": ("change", "modify", "upgrade", "switch"),
    "modify": ("change", "update", "switch"),
    "book": ("reserve",),
    "return": ("refund", "send back"),
    "cancel": ("cancellation",),
    "send": ("compensation", "certificate", "voucher"),
    "create": ("add", "new task"),
    "transfer": ("human",),
    "refuel": ("data",),
    "resume": ("reactivate", "restore"),
}
_NOT_VERBS = {"call", "give", "unlock", "get", "log", "list", "find", "search", "check", "calculate"}


def _verbs(name: str) -> set[str]:
    """The words an agent uses for what a writing tool does: the verb its name starts with, and synonyms."""
    verb = name.lower().split("_", 1)[0]
    if verb in _NOT_VERBS or not verb.isalpha():
        return set()
    return {verb, *_SYNONYMS.get(verb, ())}


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"\b{re.escape(word)}", text, re.I) is not None


def _call_of(raw: dict) -> tuple[str, dict]:
    fn = raw.get("function") or raw
    args = fn.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {}
    return fn.get("name") or "", args if isinstance(args, dict) else {}


@functools.lru_cache(maxsize=64)
def _domain_writes(domain: str) -> tuple[frozenset[str], frozenset[str]]:
    if not domain:
        return frozenset(), frozenset()
    try:
        spec = get_domain_spec(domain)
    except KeyError:
        return frozenset(), frozenset()
    kits = (spec.agent_toolkit, spec.user_toolkit)
    agent, user = (frozenset() if k is None else frozenset(n for n in k.tool_names if k.mutates_state(n)) for k in kits)
    return agent, user


def _same_call(name: str, args: dict, action: Action) -> bool:
    return name == action.name and json.dumps(args, sort_keys=True) == json.dumps(action.arguments, sort_keys=True)


# ----------------------------------------------------------------------------------------------- the customer

THANKS_TEXT = "Thank you! Is everything I asked for taken care of now?"
DECLINE_TEXT = "I don't think that change is needed for my problem. What else can I check?"


class TalkingUser(UserSimulator):
    """A deterministic customer that holds a conversation (see the module docstring for what it does).

    ``max_turns``: the customer's messages (texts and tool calls) after which it stops. ``patience``: replies in a
    row that answered nothing and performed nothing after which it stops (an agent that only repeats itself).
    ``max_calls_per_request``: its own tool calls answering one agent message. ``stop_text`` is what ends the
    conversation (``###STOP###``, as :class:`~tau2_gym.players.users.scripted.OracleUser`).
    """

    implementation = "talking_user"

    def __init__(
        self, max_turns: int = 30, patience: int = 3, max_calls_per_request: int = 12, stop_text: str = STOP
    ) -> None:
        if max_turns < 1 or patience < 1 or max_calls_per_request < 0:
            raise ValueError("max_turns and patience must be >= 1, max_calls_per_request >= 0")
        self.max_turns = max_turns
        self.patience = patience
        self.max_calls_per_request = max_calls_per_request
        self.stop_text = stop_text
        self._facts: dict[str, TaskFacts] = {}

    def __getstate__(self) -> dict:
        """Pickled (Ray actors, copies) without the parse memo: it is rebuilt on demand."""
        return {**self.__dict__, "_facts": {}}

    # -------------------------------------------------------------------- helpers

    def facts(self, task: Task) -> TaskFacts:
        """The parsed task, memoised by the task's content (parsing is pure, so the memo cannot change a reply;
        its serialisation costs a fraction of a parse)."""
        key = task.model_dump_json()
        hit = self._facts.get(key)
        if hit is None:
            if len(self._facts) > 4096:
                self._facts.clear()
            hit = self._facts[key] = task_facts(task)
        return hit

    def fallback_texts(self, facts: TaskFacts) -> list[str]:
        """The replies that move nothing, in the order given (the last one repeats)."""
        recap = f" {facts.recap}" if facts.recap else ""
        return [
            f"As I said: {facts.opening}{recap}",
            "Could you please help me with that? Is there anything else you need from me?",
            "I'm still waiting for help with my request.",
        ]

    @staticmethod
    def _writes(domain: Optional[str]) -> tuple[frozenset[str], frozenset[str]]:
        """(agent-side, user-side) writing tool names of the domain (empty when it is unknown)."""
        return _domain_writes(domain or "")

    # -------------------------------------------------------------------- the turn

    def generate(self, request: UserTurnRequest) -> UserMessage:
        task = request.task
        facts = self.facts(task)
        if request.turn == 0:
            return UserMessage(content=facts.opening)
        if request.turn >= self.max_turns:
            return UserMessage(content=self.stop_text)
        msgs = request.messages
        last_agent = max((i for i, m in enumerate(msgs) if m["role"] == "user"), default=-1)
        text = (msgs[last_agent].get("content") or "") if last_agent >= 0 else ""
        since = msgs[last_agent + 1 :]
        my_calls = [_call_of(tc) for m in since if m["role"] == "assistant" for tc in m.get("tool_calls") or ()]

        if _GOODBYE.search(text):
            return UserMessage(content=self.stop_text)
        if any(_TRANSFERRING.search(x) for x in _sentences(text) if "?" not in x):  # said, not offered
            return UserMessage(content=TRANSFER)

        declined: list[str] = []
        call = self._device_call(request, text, msgs, my_calls, declined)
        if call is not None:
            return call
        reply = self._answer(task, facts, text, request, relay=not (declined or my_calls))
        if my_calls:  # the agent's request is carried out: report what the tools said (and answer the rest)
            _, user_writes = self._writes(request.extra.get("domain"))
            results = [(m.get("content") or "").strip() for m in since if m["role"] == "tool"]
            shown = " ".join(r for r in results if r)[:600]
            wrote = any(name in user_writes for name, _ in my_calls)
            report = ("I did that. " if wrote else "") + (f"Here is what I see: {shown}" if shown else "")
            return UserMessage(content=" ".join(p for p in (report.strip() or "I did that.", reply) if p))
        if reply is not None:
            return UserMessage(content=reply)
        if _WRAP_UP.search(text):
            return UserMessage(content=self.stop_text)
        if declined:
            return self._fallback(facts, msgs, DECLINE_TEXT)
        if text.strip() and _DONE_REPORT.search(text) and "?" not in text:
            return self._fallback(facts, msgs, THANKS_TEXT)
        return self._fallback(facts, msgs)

    def _fallback(self, facts: TaskFacts, msgs: list[dict], first: Optional[str] = None) -> UserMessage:
        """An idle reply: ``first`` or the next of :meth:`fallback_texts`; the stop after ``patience`` of them."""
        texts = self.fallback_texts(facts)
        idle = {*texts, THANKS_TEXT, DECLINE_TEXT}
        streak = 0
        for m in reversed(msgs):
            if m["role"] != "assistant":
                continue
            if m.get("tool_calls") or (m.get("content") or "") not in idle:
                break
            streak += 1
        if streak >= self.patience:
            return UserMessage(content=self.stop_text)
        return UserMessage(content=first if first is not None else texts[min(streak, len(texts) - 1)])

    # -------------------------------------------------------------------- its own tools

    def _device_call(
        self,
        request: UserTurnRequest,
        text: str,
        msgs: list[dict],
        my_calls: list[tuple[str, dict]],
        declined: list[str],
    ) -> Optional[UserMessage]:
        """The customer's next tool call answering the agent's last message, or None (``declined`` receives the
        writing tools the agent asked for that the task does not need)."""
        if not request.tools or not text or len(my_calls) >= self.max_calls_per_request:
            return None
        available = {t["function"]["name"]: t["function"] for t in request.tools if "function" in t}
        gold = user_gold_actions(request.task)
        done = [_call_of(tc) for m in msgs if m["role"] == "assistant" for tc in m.get("tool_calls") or ()]
        pending, i = [], 0
        for action in gold:  # gold user actions not yet performed (matched in order, as the evaluator replays)
            j = i
            while j < len(done) and not _same_call(*done[j], action):
                j += 1
            if j < len(done):
                i = j + 1
            else:
                pending.append(action)
        _, user_writes = self._writes(request.extra.get("domain"))
        low = text.lower()

        def call(name: str, args: dict) -> UserMessage:
            n = sum(len(m.get("tool_calls") or ()) for m in msgs if m["role"] == "assistant")
            return UserMessage(
                content=None, tool_calls=[ToolCall(name, dict(args), id=f"user_call_{n}", requestor="user")]
            )

        def fresh(name: str, args: dict) -> bool:
            return not any(n == name and a == args for n, a in my_calls)

        # 1. a pending gold action named by its tool name, or by a distinctive argument with a request cue
        named = [name for name in available if name in text]
        for action in pending:
            # as often as the message names it ("x(); x()"), and never more often than the task performs it
            asked = max(text.count(action.name + "("), 1)
            if action.name in named and sum(n == action.name for n, _ in my_calls) < asked:
                return call(action.name, action.arguments)
        if _REQUEST_CUE.search(text) or re.search(r"\b(recommend|suggest|best|apply)\b", low):
            own = " ".join(self.facts(request.task).known.values()).lower()  # its own name, ids: not a request
            for action in pending:
                if action.name not in available:
                    continue
                values = [v.lower() for v in _string_values(action.arguments) if _distinctive(v)]
                if any(v in low and v not in own for v in values):
                    return call(action.name, action.arguments)
        # 2. a request in the agent's words (telecom's device actions, mock's notifications), unless it named tools:
        # a change the task still needs first, then a look at the state
        if not named:
            reads: list[str] = []
            for sentence in _sentences(text):
                if _SELF_PROPOSAL.search(sentence) or not (
                    _REQUEST_CUE.search(sentence) or _ACTION_VERBS.match(sentence) or re.match(r"(?i)check", sentence)
                ):
                    continue
                wants_action = _ACTION_VERBS.search(sentence) is not None
                hits = sorted(  # in the order the sentence names them (the table's order among equals)
                    ((m.start(), k, read, write) for k, (pattern, read, write) in enumerate(_DEVICE_RE)
                     for m in [pattern.search(sentence)] if m),
                    key=lambda h: h[:2],
                )  # fmt: skip
                unneeded = []
                for _, _, read, write in hits:
                    if write and any(n == write for n, _ in my_calls):
                        continue  # done for this message: no second time, no look afterwards
                    if write and wants_action and write in available:
                        same = [a for a in pending if a.name == write]
                        # of several (two permissions), the one whose arguments the sentence names
                        said = [
                            a for a in same if any(v.lower() in sentence.lower() for v in _string_values(a.arguments))
                        ]
                        if said or same:
                            return call(write, (said or same)[0].arguments)
                        unneeded.append(write)
                    if read and read in available and read not in user_writes and not _required(available[read]):
                        reads.append(read)
                declined.extend(unneeded)
            for read in reads:
                if fresh(read, {}):
                    return call(read, {})
        # 3. any read-only tool of its own the agent names
        for name in named:
            if name not in user_writes and not _required(available[name]) and fresh(name, {}):
                return call(name, {})
        return None

    # -------------------------------------------------------------------- questions and confirmations

    def _answer(
        self, task: Task, facts: TaskFacts, text: str, request: UserTurnRequest, relay: bool = True
    ) -> Optional[str]:
        """Answers to what the agent asks (facts first, then a confirmation), or None when it asks nothing.
        ``relay``: answer a question no topic covers with the task's best matching sentence."""
        asks = [s for s in _sentences(text) if _REQUEST_CUE.search(s) and not _WRAP_UP.search(s)]
        if not asks:
            return None
        confirm = [s for s in asks if _CONFIRM_CUE.search(s) and not _WH.search(s)]
        asked = " ".join(s for s in asks if s not in confirm)
        parts: list[str] = []
        shared, directed = _directive(facts.sentences, asked) if asked else (0, None)
        if shared >= 2:  # the task says how to answer this very question
            parts.append(directed or "")
            asked = ""
        for topic, pattern in _TOPICS.items():
            if not pattern.search(asked):
                continue
            if topic == "address" and not re.search(r"(?<!mail )address", asked, re.I):
                continue
            if topic == "name" and not re.search(r"(?<!user )\bname\b", asked, re.I):
                continue
            parts.append(self._fact(facts, topic))
        if not parts and asked and relay:
            parts.append(_relay(facts.sentences, asked) or "")
        parts = list(dict.fromkeys(p for p in parts if p))
        if confirm:
            parts.append(self._confirm(task, text, request))  # the whole message: the proposal may precede it
        if not parts:
            return None
        return " ".join(parts)

    def _fact(self, facts: TaskFacts, topic: str) -> str:
        if topic == "request":
            return facts.opening
        if topic in facts.known:
            return facts.known[topic]
        if topic in facts.unknown:
            return facts.unknown[topic]
        words = _TOPIC_WORDS[topic]
        relevant = [s for s in facts.sentences if any(w in s.lower() for w in words)]
        for s in relevant:  # "If the agent asks for <this>, say <that>" first
            m = _DIRECTIVE.match(s)
            if m and any(w in m.group(1).lower() for w in words):
                return _sentence_case(m.group(2))
        plain = [s for s in relevant if not _CONDITIONAL.match(s)]
        if plain:
            return plain[0]
        return f"I'm sorry, I don't know my {_LABELS[topic]}."

    def _confirm(self, task: Task, text: str, request: UserTurnRequest) -> str:
        """Yes to a write the task wants (one of its gold actions, or what the customer called about), no to a
        write it does not want; yes to anything else (looking something up, a summary to confirm)."""
        agent_writes, _ = self._writes(request.extra.get("domain"))
        actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
        wanted: set[str] = set()
        for a in actions or []:
            if a.requestor == "user":
                continue
            wanted |= _verbs(a.name)
            for v in _string_values(a.arguments):  # a discoverable tool named in the call
                if re.fullmatch(r"[a-z]+(?:_[a-z]+)+_\d+", v):
                    wanted |= _verbs(v)
        request_text = first_person(_instruction_parts(task)[0] or _instruction_text(task))
        proposed = set().union(*(_verbs(n) for n in agent_writes)) if agent_writes else set()
        proposed = {w for w in proposed | wanted if _mentions(text, w)}
        if not proposed:
            return "Yes, please."
        asked_for = any(re.search(rf"\b{re.escape(w)}s?\b", request_text, re.I) for w in proposed)
        if proposed & wanted or asked_for:
            return "Yes, please go ahead."
        return "No, I don't want that."


def _required(schema: dict) -> bool:
    return bool((schema.get("parameters") or {}).get("required"))


def _string_values(args: dict) -> list[str]:
    out = []
    for v in args.values():
        if isinstance(v, str):
            out.append(v)
            if v.strip().startswith("{"):
                try:
                    inner = json.loads(v)
                except ValueError:
                    continue
                if isinstance(inner, dict):
                    out.extend(_string_values(inner))
    return out


def _distinctive(value: str) -> bool:
    """An argument value that names one thing (a card, a discoverable tool, an id), not a common word."""
    return len(value) >= 6 and re.search(r"[\s_\dA-Z]", value) is not None


def _instruction_text(task: Task) -> str:
    return " ".join(_instruction_parts(task))


_CONDITIONAL = re.compile(r"(?i)(?:if|when|whenever|once|after|before|unless)\b")
_DIRECTIVE = re.compile(
    r"(?i)(?:if|when|whenever) (?:the )?(?:service |customer service )?(?:agent|representative) (?:asks?|inquires?)"
    r"(?: me)?(?: about| for| if| whether| how| what)?\s*(.+?),\s*(?:then )?(?:just )?(?:I |you )?"
    r"(?:say|tell (?:them|the agent)|mention|respond|answer|reply|explain)(?: that)?\s+(.+)$"
)
_STOPWORDS = {
    "what", "which", "when", "where", "your", "yours", "mine", "with", "that", "this", "have", "would", "could",
    "should", "please", "like", "help", "need", "know", "tell", "provide", "give", "want", "there", "they", "them",
    "about", "from", "into", "also", "just", "today", "agent", "able", "will", "shall", "does", "were", "been",
    "being", "more", "some", "than", "then", "those", "these", "their", "here", "very", "make", "sure", "okay",
}  # fmt: skip


_WORD_SENSE = {"earn": "income", "salary": "income", "earning": "income", "annual": "income", "yearly": "income"}


def _content_words(text: str) -> set[str]:
    """Lower-case words of four letters or more, stop words out, a plural "s" off."""
    out = set()
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if len(w) < 4 or w in _STOPWORDS:
            continue
        if len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        if len(w) > 6 and w.endswith("ly"):
            w = w[:-2]
        out.add(_WORD_SENSE.get(w, w))
    return out


def _sentence_case(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _directive(sentences: list[str], question: str) -> tuple[int, Optional[str]]:
    """(words shared, answer) of the "if the agent asks about X, say Y" sentence whose X best matches."""
    asked = _content_words(question)
    best: tuple[int, Optional[str]] = (0, None)
    for s in sentences:
        m = _DIRECTIVE.match(s)
        if m:
            score = len(asked & _content_words(m.group(1)))
            if score > best[0]:
                best = (score, _sentence_case(m.group(2)))
    return best


def _relay(sentences: list[str], question: str) -> Optional[str]:
    """The task sentence that answers a question no topic covers: the best matching "if the agent asks about X,
    say Y" directive (its Y), else the plain (unconditional) sentence sharing the most words with it."""
    asked = _content_words(question)
    score, answer = _directive(sentences, question)
    plain = [(s, _content_words(s)) for s in sentences if not _CONDITIONAL.match(s)]
    # a word in few sentences says more than one in many (the first of equals wins)
    weight = {w: 1.0 / sum(w in words for _, words in plain) for w in asked if any(w in ws for _, ws in plain)}
    best, best_score = answer, float(score)
    for s, words in plain:
        value = sum(weight[w] for w in sorted(asked & words))  # a fixed order: the same float in every process
        if value > best_score:
            best, best_score = s, value
    return best
