"""The ed25519 key pair that signs the recommended-config file: made by `joulehouse keys generate`,
the private key read by the export, the public key by every agent (collectors/config_contract.py)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from joulehouse.collectors import lakefs
from joulehouse.collectors.input_file import read_bytes_at_most

# An ed25519 PEM key is about 120 bytes: a larger file is not one, refused unread (/dev/zero never ends).
MAX_KEY_BYTES = 64 << 10
PRIVATE_KEY_NAME = "joulehouse-ed25519.pem"
PUBLIC_KEY_NAME = "joulehouse-ed25519.pub.pem"


def key_id(public_key: Ed25519PublicKey) -> str:
    """First 16 hex digits of the SHA-256 of the raw 32-byte public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def generate_keypair(directory: str | Path, *, overwrite: bool = False) -> tuple[Path, Path]:
    """Write a new ed25519 key pair as PEM files in `directory` (private key mode 0600).
    Returns (private_path, public_path). Refuses to replace existing keys unless `overwrite`."""
    folder = Path(directory)
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    if made:
        folder.chmod(0o755)  # not the umask's 775: the public key's folder must not be group-writable
    private_path, public_path = folder / PRIVATE_KEY_NAME, folder / PUBLIC_KEY_NAME
    if not overwrite and (private_path.exists() or public_path.exists()):
        raise FileExistsError(f"{private_path} or {public_path} already exists; replace them with `joulehouse keys generate --overwrite`")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # A fresh 0600 file renamed over the old key: opened in place, an old key's wider mode (chmod
    # 644 by hand) was kept and the new secret was world-readable
    lakefs.write_file_atomically(private_path, private_pem, 0o600)
    # 0644 whatever the umask: under umask 002 it was 664 in a 775 folder, which load_public_key
    # refuses (anyone in the group could swap the key the agent trusts)
    lakefs.write_file_atomically(public_path, public_pem, 0o644)
    return private_path, public_path


def _refuse_open_to_others(path: str | Path, what: str, *, secret: bool) -> None:
    """Refuse a key other users could change (or, for the secret one, read). The public key is the
    agent's trust anchor: whoever can replace it (the file, or a name in its folder) signs configs
    the agent applies as root. A folder with the sticky bit (/tmp) lets no one replace another's file."""
    path = Path(path)
    file_mask = 0o026 if secret else 0o022  # the secret: no other may read it either; 0640 for a group is fine
    checks = [(path, file_mask, "file")] + ([] if secret else [(path.parent, 0o022, "folder")])
    for target, mask, kind in checks:
        st = target.stat()
        if kind == "folder" and st.st_mode & stat.S_ISVTX:
            continue
        if st.st_uid not in (0, os.geteuid()) or st.st_mode & mask:
            raise ValueError(
                f"{what} {path}: its {kind} {target} (owner uid {st.st_uid}, mode {st.st_mode & 0o777:o}) can be "
                f"{'read or written' if secret and kind == 'file' else 'written'} by another user; refused "
                f"(chmod {'600' if secret else 'go-w'} {target}, owned by this user or root)")


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """Read an unencrypted PEM ed25519 private key (no other user may read or write it)."""
    if not Path(path).exists():
        raise FileNotFoundError(f"private key {path} does not exist (create one with `joulehouse keys generate`)")
    _refuse_open_to_others(path, "private key", secret=True)
    data = read_bytes_at_most(path, "private key", MAX_KEY_BYTES)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} holds a {type(key).__name__}, expected an ed25519 private key")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """Read a PEM ed25519 public key (neither it nor its folder writable by another user)."""
    data = read_bytes_at_most(path, "public key", MAX_KEY_BYTES)
    _refuse_open_to_others(path, "public key", secret=False)
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise ValueError(f"{path} is not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"{path} holds a {type(key).__name__}, expected an ed25519 public key")
    return key
