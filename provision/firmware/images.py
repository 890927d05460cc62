"""The controller's image server: the baseline's images over plain HTTP to the BMCs, checksums checked twice.

Before any BMC is told of an image, its file's SHA-256 must be the one the site pins (`verify_image`): a mismatch
is refused there, with no request sent to any BMC. While a BMC downloads it, the bytes sent are hashed again
(`ImageServer.served`): a file that changed on disk between the check and the download shows up as a served
digest that is not the pin, and the host fails instead of being recorded on its new version. The server
answers GET and HEAD for the images it was given, by a name that carries the digest, nothing else; it binds
where the site's `firmware_rollout.image_listen` (or `image_url`) says.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from provision.errors import BringupError
from provision.site.firmware import FirmwareImage

CHUNK = 1 << 20
MAX_REQUEST = 8192


class ImageError(BringupError):
    """An image the site pins cannot be served as pinned."""


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_image(site_dir: Path, image: FirmwareImage) -> Path:
    """The image's file, once its SHA-256 is the pinned one; raises ImageError (no BMC has seen it)."""
    path = (site_dir / image.file).resolve()
    if not path.is_relative_to(site_dir.resolve()) or not path.is_file():
        raise ImageError(f"image {image.file}: no such file under the site's folder")
    found = file_digest(path)
    if found != image.sha256:
        raise ImageError(f"image {image.file}: SHA-256 {found} is not the pinned {image.sha256}")
    return path


@dataclass
class ImageServer:
    listen: tuple[str, int]
    base_url: str  # as the BMCs reach it
    files: dict[str, Path] = field(default_factory=dict)  # URL name -> file
    pinned: dict[str, str] = field(default_factory=dict)  # URL name -> SHA-256
    served: dict[str, list[str]] = field(default_factory=dict)  # URL name -> digest of each complete download
    _server: asyncio.Server | None = None

    def add(self, site_dir: Path, image: FirmwareImage) -> str:
        """Check the image, then offer it; its URL."""
        path = verify_image(site_dir, image)
        name = f"{image.sha256[:16]}-{path.name}"
        self.files[name] = path
        self.pinned[name] = image.sha256
        return self.base_url.rstrip("/") + "/" + name

    def served_ok(self, url: str) -> bool | None:
        """Whether the last complete download of this URL sent the pinned bytes (None: not downloaded)."""
        name = url.rsplit("/", 1)[-1]
        got = self.served.get(name)
        return None if not got else got[-1] == self.pinned.get(name)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.listen[0], self.listen[1], reuse_address=True)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def __aenter__(self) -> ImageServer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(30):
                head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_REQUEST:
                raise ValueError("request head too large")
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            name = target.split("?", 1)[0].lstrip("/")
            path = self.files.get(name)
            if method not in ("GET", "HEAD") or path is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            size = path.stat().st_size
            writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {size}\r\n"
                         "Connection: close\r\n\r\n".encode())
            if method == "HEAD":
                return
            digest = hashlib.sha256()
            with path.open("rb") as fh:
                while chunk := fh.read(CHUNK):
                    digest.update(chunk)
                    writer.write(chunk)
                    await writer.drain()
            self.served.setdefault(name, []).append(digest.hexdigest())
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # a client that went away or sent garbage: nothing was served
        finally:
            with contextlib.suppress(Exception):
                await writer.drain()
            writer.close()


def server_for(image_url: str, listen: str | None) -> ImageServer:
    """An image server from the site's `image_url` (and `image_listen`)."""
    parts = urlsplit(image_url)
    if parts.scheme != "http" or not parts.hostname:
        raise ImageError(f"firmware_rollout.image_url {image_url!r}: an http:// URL with a host is needed")
    host, port = parts.hostname, parts.port or 80
    if listen:
        host, _, given = listen.rpartition(":")
        port = int(given)
    return ImageServer((host, port), image_url)
