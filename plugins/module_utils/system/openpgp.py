# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenPGP public keys: fingerprints and the pinned-fingerprint check (pure, no I/O).

A repository signing key is fetched from the same place as the packages it signs, so it proves nothing
until its fingerprint matches one pinned from another source. The fingerprint is computed here from the
key's own bytes (RFC 4880 12.2 for v4 keys, RFC 9580 5.5.4 for v5/v6) instead of asking gpg on the node:
Debian and Ubuntu nodes often have only gpgv, and the bytes that are checked are the bytes that are
then written. tests/unit checks the result against ``gpg --show-keys --with-colons`` on real keys.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import re

__all__ = ["key_fingerprints", "normalize_fingerprint", "fingerprint_format_problem", "pin_problems"]

_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_END = "-----END PGP PUBLIC KEY BLOCK-----"
_TAG_PUBLIC_KEY = 6
_FINGERPRINT = re.compile(r"^([0-9A-F]{40}|[0-9A-F]{64})$")


def _crc24(data):
    crc = 0xB704CE
    for byte in bytearray(data):
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def _dearmor(text):
    """The binary packets of every public key block in ``text``; ValueError when there is none or one is damaged."""
    out = b""
    blocks = 0
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() != _BEGIN:
            i += 1
            continue
        i += 1
        while i < len(lines) and lines[i].strip() and ":" in lines[i]:   # armor headers (Version: ...)
            i += 1
        body, crc = [], None
        while i < len(lines) and lines[i].strip() != _END:
            line = lines[i].strip()
            if line.startswith("=") and len(line) == 5:
                crc = line[1:]
            elif line:
                body.append(line)
            i += 1
        if i >= len(lines):
            raise ValueError("the key block has no end line (%s)" % _END)
        try:
            data = base64.b64decode("".join(body).encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeEncodeError):
            raise ValueError("the key block is not valid base64")
        if crc is not None:
            try:
                want = int.from_bytes(base64.b64decode(crc.encode("ascii"), validate=True), "big")
            except (binascii.Error, ValueError, UnicodeEncodeError):
                raise ValueError("the key block's checksum line is not valid base64")
            if want != _crc24(data):
                raise ValueError("the key block's CRC24 checksum does not match (damaged download)")
        out += data
        blocks += 1
        i += 1
    if not blocks:
        raise ValueError("no ASCII-armored public key block (%s) found" % _BEGIN)
    return out


def _packets(data):
    """(tag, body) of each OpenPGP packet (RFC 4880 4.2: old and new formats, no partial lengths)."""
    pos, size = 0, len(data)
    while pos < size:
        first = data[pos]
        pos += 1
        if not first & 0x80:
            raise ValueError("byte %d is not an OpenPGP packet header" % (pos - 1))
        if first & 0x40:   # new format
            tag = first & 0x3F
            if pos >= size:
                raise ValueError("truncated packet header")
            o1 = data[pos]
            if o1 < 192:
                length, pos = o1, pos + 1
            elif o1 < 224:
                if pos + 1 >= size:
                    raise ValueError("truncated packet header")
                length, pos = ((o1 - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif o1 == 255:
                length, pos = int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5
            else:
                raise ValueError("partial body lengths do not occur in a public key")
        else:              # old format
            tag, kind = (first >> 2) & 0x0F, first & 0x03
            if kind == 3:
                raise ValueError("indeterminate packet lengths do not occur in a public key")
            width = (1, 2, 4)[kind]
            length, pos = int.from_bytes(data[pos:pos + width], "big"), pos + width
        if pos + length > size:
            raise ValueError("a packet runs past the end of the key data (truncated download)")
        yield tag, data[pos:pos + length]
        pos += length


def _fingerprint(body):
    version = body[0] if body else 0
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise ValueError("public key packet version %d is not supported (v4, v5 or v6)" % version)


def key_fingerprints(content):
    """Fingerprints of the primary keys in ``content`` (ASCII-armored text, or binary/armored bytes).

    Subkeys (their own fingerprints) are not listed: a subkey is bound to its primary key.
    Raises ValueError when the content holds no readable public key.
    """
    if isinstance(content, bytes):
        if content[:1] and content[0] & 0x80:
            data = content
        else:
            data = _dearmor(content.decode("ascii", "replace"))
    else:
        data = _dearmor(str(content))
    out = [_fingerprint(body) for tag, body in _packets(data) if tag == _TAG_PUBLIC_KEY]
    if not out:
        raise ValueError("the data holds no public key packet")
    return out


def normalize_fingerprint(value):
    """``EB69 3B30 ...``, ``0xeb693b30...`` -> ``EB693B30...``."""
    text = re.sub(r"\s+", "", str(value or "")).upper()
    return text[2:] if text.startswith("0X") else text


def fingerprint_format_problem(value):
    """None when ``value`` is a full fingerprint (40 hex digits, or 64 for v5/v6 keys), else what is wrong."""
    if not _FINGERPRINT.match(normalize_fingerprint(value)):
        return ("%r is not a full key fingerprint (40 hexadecimal digits, spaces allowed; a short key id such "
                "as 3bf863cc identifies nothing)" % (value,))
    return None


def pin_problems(content, pinned, variable, source, code):
    """Problems (code, variable, message, fix) when the key ``content`` fetched from ``source`` is not exactly
    the key pinned in ``variable`` (every primary key in the file must be the pinned one: apt and dnf trust
    them all)."""
    def problem(message, fix):
        return [{"code": code, "variable": variable, "message": message, "fix": fix}]

    wrong = fingerprint_format_problem(pinned)
    if wrong:
        return problem("%s %s" % (variable, wrong),
                       "set %s to the key's full fingerprint as its publisher lists it." % variable)
    want = normalize_fingerprint(pinned)
    try:
        found = key_fingerprints(content)
    except ValueError as exc:
        return problem("the key at %s is not a usable OpenPGP public key: %s; it was not installed" % (source, exc),
                       "check the URL (it must serve the ASCII-armored public key) and what your mirror serves there.")
    others = sorted(set(f for f in found if f != want))
    if others or want not in found:
        return problem(
            "the key at %s has fingerprint %s, not the pinned %s: it was not installed and the repository was "
            "not added (a key served beside the packages proves nothing by itself)" % (source, ", ".join(found), want),
            "if your mirror serves its own key on purpose, set %s to that key's fingerprint (from a source other "
            "than the mirror); otherwise the mirror or the network path is serving a different key - find out why."
            % variable)
    return []
