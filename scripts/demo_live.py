"""The demo's live-delivery scene: devices on a real WebSocket gateway receive messages as they
happen, and one that was away resumes without a gap.

A gateway process (uvicorn serving ``config.asgi`` on loopback) runs beside the demo's workers.
The consumer backend mints one connection token per device (``POST /users/{uid}/live-tokens``,
scope ``inbox``); the devices connect with the ``websockets`` client from a thread of the demo.
The scene, checked at the end (``LiveScene.problems``):

1. a VIP customer's phone and laptop and the shop's console are online before the priority
   campaign launches: both of the customer's devices get the campaign's message live;
2. the customer replies to the shop (1:1) from the phone: the shop's console gets it, and so
   does the customer's laptop (the sender's other device);
3. the laptop drops; the shop answers; the phone gets it live; the laptop reconnects with the
   last cursor it had and gets the answer it missed (``resumed``), once, before anything live.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websockets
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 30.0


@dataclass
class Device:
    """One connected device: the frames it received, in order, with when they arrived."""

    uid: int
    device_id: str
    frames: list[dict[str, Any]] = field(default_factory=list)
    stop: asyncio.Event | None = None

    @property
    def cursor(self) -> str:
        return next((f["cursor"] for f in reversed(self.frames) if "cursor" in f), "")

    def messages(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == "message"]


class LiveScene:
    """The gateway process, the devices' event loop and what each device saw."""

    def __init__(self, token: str, say: Any) -> None:
        self.api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        self.say = say  # prints one line of the scene
        self.port = _free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="devices", daemon=True)
        self.gateway: subprocess.Popen[bytes] | None = None
        self.devices: dict[str, Device] = {}

    # -- the gateway process --------------------------------------------------------------------
    def start(self, log_dir: Path) -> None:
        cmd = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--ws-per-message-deflate", "false"]
        cmd += ["--log-level", "warning"]  # the WebSocket protocol: what is installed
        log = open(log_dir / "gateway.log", "wb")  # noqa: SIM115
        env = dict(os.environ, LOG_FORMAT="text")
        self.gateway = subprocess.Popen(
            cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        self.thread.start()
        _wait_for_port(self.port)

    def stop(self) -> None:
        for device in self.devices.values():
            self._disconnect(device)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self.gateway is not None:
            self.gateway.terminate()
            self.gateway.wait(timeout=30)

    # -- devices --------------------------------------------------------------------------------
    def connect(self, name: str, uid: int, since: str = "") -> Device:
        device = self.devices.get(name) or Device(uid, name)
        self.devices[name] = device
        reply = self.api.post(
            f"/api/v1/users/{uid}/live-tokens", {"device_id": name}, content_type="application/json"
        )
        assert reply.status_code == 201, reply.content
        url = f"ws://127.0.0.1:{self.port}/live/v1?token={reply.json()['token']}"
        url += f"&since={since}" if since else ""
        ready = threading.Event()
        asyncio.run_coroutine_threadsafe(self._hold(device, url, ready), self.loop)
        if not ready.wait(WAIT_S):
            raise SystemExit(f"demo: device {name} got no hello from the gateway")
        return device

    def drop(self, name: str) -> str:
        """Disconnect a device; returns the last cursor it received."""
        device = self.devices[name]
        self._disconnect(device)
        return device.cursor

    def _disconnect(self, device: Device) -> None:
        if device.stop is not None:
            self.loop.call_soon_threadsafe(device.stop.set)
            device.stop = None
            time.sleep(0.2)

    async def _hold(self, device: Device, url: str, ready: threading.Event) -> None:
        device.stop = stop = asyncio.Event()
        async with websockets.connect(url) as socket_:
            reader = asyncio.ensure_future(self._read(device, socket_, ready))
            await stop.wait()
            reader.cancel()

    async def _read(self, device: Device, socket_: Any, ready: threading.Event) -> None:
        async for raw in socket_:
            frame = json.loads(raw)
            device.frames.append(frame)
            if frame.get("type") == "hello":
                ready.set()
                self.say(f"  {device.device_id:<14} ← hello (resumed: {frame['resumed']})")
            elif frame.get("type") == "message":
                text = frame["message"]["content"].get("text", "")
                peer = frame["conversation"].get("peer_uid")
                self.say(f"  {device.device_id:<14} ← message with {peer}: {text!r}")

    def wait_for(self, name: str, text: str) -> bool:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if any(_text(f) == text for f in self.devices[name].messages()):
                return True
            time.sleep(0.05)
        return False

    def received(self, name: str, text: str) -> int:
        return sum(1 for f in self.devices[name].messages() if _text(f) == text)

    def resumed_first(self, name: str, text: str) -> bool:
        """The device's latest connection said resumed and replayed ``text`` right after hello."""
        frames = self.devices[name].frames
        hello = max(i for i, f in enumerate(frames) if f.get("type") == "hello")
        after = frames[hello + 1 : hello + 2]
        return bool(frames[hello]["resumed"]) and bool(after) and _text(after[0]) == text


def _text(frame: dict[str, Any]) -> str:
    return str(frame.get("message", {}).get("content", {}).get("text", ""))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"demo: the gateway did not listen on :{port} (var/gateway.log)")
