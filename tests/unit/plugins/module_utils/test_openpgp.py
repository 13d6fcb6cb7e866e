from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.system import openpgp

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "openpgp")
KEYS = [
    "ed25519_sign-only__gpg-2.2.40-generated.asc",
    "rsa3072_with-subkey__gpg-2.2.40-generated.asc",
    "rsa3072_with-subkey__gpg-2.2.40-generated.gpg",
    "two-keys__gpg-2.2.40-generated.asc",
]
ED25519 = "52F9167E49473645F0959B9B68A985CC4E893FF6"
RSA = "705F89B80E216C918A61FEEB3AFC6204F0283F57"
RSA_SUBKEY = "54B95C492D2C719899F57B578A4124462D067A3C"


def _read(name, mode="r"):
    with open(os.path.join(FIXTURES, name), mode) as fh:
        return fh.read()


def _gpg_primary_fingerprints(colons):
    """The fpr record that follows each pub record of `gpg --show-keys --with-colons` (gpg's DETAILS file)."""
    out, after_pub = [], False
    for line in colons.splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            after_pub = True
        elif fields[0] == "fpr" and after_pub:
            out.append(fields[9])
            after_pub = False
        elif fields[0] in ("sub", "uid"):
            after_pub = False
    return out


@pytest.mark.parametrize("name", KEYS)
def test_fingerprints_equal_what_gpg_shows(name):
    gpg = _gpg_primary_fingerprints(_read(name + ".show-keys-colons.txt"))
    assert gpg, "the gpg capture lists no primary key"
    content = _read(name, "rb") if name.endswith(".gpg") else _read(name)
    assert openpgp.key_fingerprints(content) == gpg


def test_known_fingerprints_and_no_subkey():
    assert openpgp.key_fingerprints(_read(KEYS[0])) == [ED25519]
    assert openpgp.key_fingerprints(_read(KEYS[1])) == [RSA]
    assert RSA_SUBKEY not in openpgp.key_fingerprints(_read(KEYS[1]))
    assert openpgp.key_fingerprints(_read(KEYS[3])) == [ED25519, RSA]


def test_armored_bytes_are_read_like_text():
    assert openpgp.key_fingerprints(_read(KEYS[1], "rb")) == [RSA]


@pytest.mark.parametrize("value, ok", [
    (RSA, True),
    ("705F 89B8 0E21 6C91 8A61  FEEB 3AFC 6204 F028 3F57", True),
    ("0x" + RSA.lower(), True),
    ("F0283F57", False),
    ("3bf863cc", False),
    (RSA[:-1], False),
    (RSA[:-1] + "G", False),
    ("", False),
    (None, False),
])
def test_fingerprint_format(value, ok):
    assert (openpgp.fingerprint_format_problem(value) is None) is ok


def _pin(content, pinned):
    return openpgp.pin_problems(content, pinned, "x_key_fingerprint", "http://mirror/key.asc", "X_KEY")


def test_pinned_key_passes_with_any_spelling():
    assert _pin(_read(KEYS[1]), RSA) == []
    assert _pin(_read(KEYS[1]), "705f 89b8 0e21 6c91 8a61 feeb 3afc 6204 f028 3f57") == []


def test_other_key_is_refused_and_named():
    problems = _pin(_read(KEYS[0]), RSA)
    assert [p["code"] for p in problems] == ["X_KEY"]
    assert problems[0]["variable"] == "x_key_fingerprint"
    assert ED25519 in problems[0]["message"] and RSA in problems[0]["message"]
    assert "http://mirror/key.asc" in problems[0]["message"]


def test_extra_key_in_the_file_is_refused():
    problems = _pin(_read(KEYS[3]), RSA)
    assert len(problems) == 1 and ED25519 in problems[0]["message"]


def test_subkey_fingerprint_is_not_the_key():
    assert len(_pin(_read(KEYS[1]), RSA_SUBKEY)) == 1


def test_short_pin_is_refused_before_reading_the_key():
    problems = _pin(_read(KEYS[1]), "F0283F57")
    assert len(problems) == 1 and "full key fingerprint" in problems[0]["message"]


def _tamper(text):
    """Flip one base64 character of the key material and drop the CRC line: the key parses, its fingerprint changes."""
    lines = text.splitlines()
    body = [i for i, line in enumerate(lines) if line and ":" not in line and not line.startswith(("-----", "="))]
    target = body[1]   # inside the primary key packet (the RSA modulus)
    line = lines[target]
    lines[target] = line[:10] + ("A" if line[10] != "A" else "B") + line[11:]
    return "\n".join(ln for ln in lines if not (ln.startswith("=") and len(ln) == 5)) + "\n"


def test_tampered_key_does_not_match():
    problems = _pin(_tamper(_read(KEYS[1])), RSA)
    assert len(problems) == 1


def test_damaged_download_fails_the_crc():
    text = _read(KEYS[1])
    lines = text.splitlines()
    tampered = _tamper(text).splitlines()
    crc = [ln for ln in lines if ln.startswith("=") and len(ln) == 5]
    assert crc, "the fixture has an armor checksum line"
    damaged = "\n".join(tampered[:-1] + crc + tampered[-1:]) + "\n"
    with pytest.raises(ValueError, match="CRC24"):
        openpgp.key_fingerprints(damaged)
    assert "not a usable OpenPGP public key" in _pin(damaged, RSA)[0]["message"]


@pytest.mark.parametrize("content", [
    "",
    "<html>404 Not Found</html>",
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGJY\n",
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n",
])
def test_not_a_key_is_refused(content):
    problems = _pin(content, RSA)
    assert len(problems) == 1 and "not a usable OpenPGP public key" in problems[0]["message"]


def test_truncated_binary_key_is_refused():
    data = _read(KEYS[2], "rb")
    with pytest.raises(ValueError):
        openpgp.key_fingerprints(data[:len(data) // 2])
