"""Who a connection is: Kafka's ``DefaultKafkaPrincipalBuilder`` and ``SslPrincipalMapper``.

PLAINTEXT and SASL-less TLS without a verified client certificate are
``User:ANONYMOUS``; a SASL exchange gives ``User:<authorization id>``; a
verified client certificate gives ``User:`` + its subject as Java's
``X500Principal.getName()`` prints it (RFC 2253: most specific RDN first,
commas without spaces, ``CN=client,OU=Eng,O=Org,C=US``), passed through
``ssl.principal.mapping.rules``.
"""

from __future__ import annotations

import re

from odradek.protocol.lean_dataclass import dataclass

ANONYMOUS = "User:ANONYMOUS"

# the keywords X500Principal.getName(RFC2253) prints; others are written OID=#<hex of the DER value>
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
# the OIDs (and DER string tags) of attributes OpenSSL names that RFC 2253 has no keyword for
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13),
         "title": ("2.5.4.12", 0x0C), "surname": ("2.5.4.4", 0x0C), "givenName": ("2.5.4.42", 0x0C),
         "initials": ("2.5.4.43", 0x0C), "generationQualifier": ("2.5.4.44", 0x0C),
         "dnQualifier": ("2.5.4.46", 0x13), "pseudonym": ("2.5.4.65", 0x0C),
         "businessCategory": ("2.5.4.15", 0x0C), "postalCode": ("2.5.4.17", 0x0C),
         "name": ("2.5.4.41", 0x0C)}


def _escape(value: str) -> str:
    """RFC 2253 section 2.4 escaping, as X500Principal applies it."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and (i == 0 or i == len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(value: str, tag: int) -> str:
    """``#`` + the hex of the value's DER encoding (tag, length, bytes), as RFC 2253 writes it."""
    data = value.encode("utf-8")
    n = len(data)
    if n < 0x80:
        length = bytes([n])
    else:
        octets = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(octets)]) + octets
    return "#" + (bytes([tag]) + length + data).hex()


def _attribute(name: str, value: str) -> str:
    if name in _KEYWORDS:
        return f"{_KEYWORDS[name]}={_escape(value)}"
    oid, tag = _OIDS.get(name, (name, 0x0C))  # OpenSSL prints an unnamed OID as dotted text
    return f"{oid}={_der_hex(value, tag)}"


def subject_dn(subject: tuple) -> str:
    """The RFC 2253 DN of ``SSLSocket.getpeercert()['subject']`` (RDNs in certificate order)."""
    rdns = ["+".join(_attribute(name, value) for name, value in rdn) for rdn in subject]
    return ",".join(reversed(rdns))


class PrincipalMappingError(ValueError):
    """No ``ssl.principal.mapping.rules`` rule matched: Kafka drops the connection."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        out = self.pattern.sub(self.replacement, dn, count=1)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU])?)\s*(?:,|$)")


def parse_mapping_rules(text: str) -> list[_Rule]:
    """``DEFAULT`` and ``RULE:<regex>/<replacement>/[LU]`` entries, comma-separated (``SslPrincipalMapper``)."""
    rules: list[_Rule] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid rule at {text[pos:]!r}: use DEFAULT or RULE:<regex>/<replacement>/[LU]")
        if m.group(1):
            rules.append(_Rule(None))
        else:
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3))
            rules.append(_Rule(re.compile(m.group(2)), replacement, m.group(4) or ""))
        pos = m.end()
    return rules or [_Rule(None)]


def ssl_principal(dn: str, rules: list[_Rule]) -> str:
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return f"User:{name}"
    raise PrincipalMappingError(f"no ssl.principal.mapping.rules rule matches {dn!r}")
