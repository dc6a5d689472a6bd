"""JAAS configuration text, as Kafka's ``JaasConfig`` parses ``sasl.jaas.config``.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

A list of ``<login module class> <flag> [key=value ...];`` entries (values
quoted with ``"`` and backslash escapes, or bare words); ``//`` and ``/* */``
comments.  A JAAS *file* wraps such lists in named sections
(``KafkaServer { ... };``), which ``parse_jaas_file`` reads.  Option values
are secrets (passwords): errors never quote them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
LOGIN_MODULES = {  # the login module a mechanism's options live under
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}

_TOKEN = re.compile(r'''
    \s+ | //[^\n]* | /\*.*?\*/                      # space and comments (skipped)
  | (?P<quoted>"(?:\\.|[^"\\])*")
  | (?P<symbol>[={};])
  | (?P<word>[^\s={};"]+)
''', re.S | re.X)


class JaasError(ValueError):
    """Malformed JAAS text; the message says where, never an option's value."""


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords: only their names are shown
        return f"LoginModule({self.name!r}, {self.flag!r}, options={sorted(self.options)})"


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"unexpected character at offset {pos}")
        pos = m.end()
        if m.lastgroup == "quoted":
            out.append(("value", re.sub(r"\\(.)", r"\1", m.group("quoted")[1:-1], flags=re.S)))
        elif m.lastgroup == "symbol":
            out.append(("symbol", m.group("symbol")))
        elif m.lastgroup == "word":
            out.append(("value", m.group("word")))
    return out


class _Reader:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, what: str) -> str:
        token = self.peek()
        if token is None:
            raise JaasError(f"unexpected end, expected {what}")
        self.i += 1
        return token[1]

    def expect(self, symbol: str) -> None:
        token = self.peek()
        if token != ("symbol", symbol):
            raise JaasError(f"expected {symbol!r} at token {self.i + 1}")
        self.i += 1

    def module(self) -> LoginModule:
        kind, name = self.peek() or ("", "")
        if kind != "value":
            raise JaasError(f"expected a login module class name at token {self.i + 1}")
        self.i += 1
        flag = self.take("a control flag").lower()
        if flag not in FLAGS:
            raise JaasError(f"login module {name}: control flag must be one of {', '.join(sorted(FLAGS))}")
        options: dict[str, str] = {}
        while self.peek() != ("symbol", ";"):
            kind, key = self.peek() or ("", "")
            if kind != "value":
                raise JaasError(f"login module {name}: expected key=value or ';' at token {self.i + 1}")
            self.i += 1
            self.expect("=")
            kind, value = self.peek() or ("", "")
            if kind != "value":
                raise JaasError(f"login module {name}: option {key!r} has no value")
            self.i += 1
            options[key] = value
        self.expect(";")
        return LoginModule(name, flag, options)


def parse_jaas(text: str) -> list[LoginModule]:
    """The login modules of a ``sasl.jaas.config`` value (at least one)."""
    reader = _Reader(text)
    modules = []
    while reader.peek() is not None:
        modules.append(reader.module())
    if not modules:
        raise JaasError("no login module given")
    return modules


def parse_jaas_file(text: str) -> dict[str, list[LoginModule]]:
    """A JAAS file: ``Section { module flag options; ... };`` -> {section: modules}."""
    reader = _Reader(text)
    sections: dict[str, list[LoginModule]] = {}
    while reader.peek() is not None:
        name = reader.take("a section name")
        reader.expect("{")
        modules = []
        while reader.peek() != ("symbol", "}"):
            modules.append(reader.module())
        reader.expect("}")
        if reader.peek() == ("symbol", ";"):
            reader.expect(";")
        sections[name] = modules
    return sections


def options_for(modules: list[LoginModule], mechanism: str) -> dict[str, str]:
    """The options of the mechanism's own login module, else of the first one (Kafka's callback
    handlers look their options up by login module)."""
    wanted = LOGIN_MODULES.get(mechanism)
    for module in modules:
        if module.name == wanted:
            return dict(module.options)
    return dict(modules[0].options) if modules else {}
