"""A local OAuth issuer for the tests: keys generated at start, a JWKS served over HTTP
(fetches counted) or written to a file, and tokens signed with them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://issuer.test"
RESOURCE = "https://gateway.test/mcp"


class Issuer:
    """RSA keys by kid; ``current`` signs; ``published`` are the kids the JWKS lists."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.published: list[str] = []
        self.current = self.rotate()
        self.fetches = 0

    def rotate(self) -> str:
        """A new key signs from now on; the JWKS lists only it."""
        kid = f"k{len(self.keys) + 1}"
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.published = [kid]
        self.current = kid
        return kid

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            public = self.keys[kid].public_key()
            entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public))
            keys.append({**entry, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()))
        return path

    def token(self, kid: str | None = None, header_kid: str | None = None, **claims: Any) -> str:
        """Signed with the key ``kid`` (default: the current one), under ``header_kid``
        in the header (default: ``kid``)."""
        now = int(time.time())
        payload = {
            "iss": ISSUER,
            "aud": RESOURCE,
            "sub": "user-1",
            "tenant": "acme",
            "scope": "read",
            "iat": now,
            "exp": now + 600,
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        kid = kid or self.current
        headers = {"kid": header_kid or kid}
        return jwt.encode(payload, self.keys[kid], algorithm="RS256", headers=headers)

    def public_pem(self) -> bytes:
        return (
            self.keys[self.current]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], payload: dict[str, Any], key: bytes = b"") -> str:
    """A JWT made by hand: ``alg`` as the header says, signed with HMAC-SHA256 over ``key``
    (or no signature for ``none``)."""
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    if header.get("alg") == "none":
        return head + "."
    signature = hmac.new(key, head.encode(), hashlib.sha256).digest()
    return head + "." + _b64(signature)


@contextmanager
def jwks_server(issuer: Issuer) -> Iterator[str]:
    """The issuer's JWKS over HTTP on 127.0.0.1 (a free port): its URL; fetches counted."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer.fetches += 1
            body = json.dumps(issuer.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()
