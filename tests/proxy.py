"""A TCP proxy on loopback that a test can cut or stall, to put faults on a real link."""

from __future__ import annotations

import selectors
import socket
import threading
import time

from tests.servers import free_port


class Proxy:
    """Forwards 127.0.0.1:port to target; `cut()` drops every connection, `stall()` stops forwarding."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.listener.setblocking(False)
        self.pairs: dict[socket.socket, socket.socket] = {}
        self.stalled = threading.Event()
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.connections = 0  # accepted so far
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        registered: set[socket.socket] = set()
        while not self.stopped.is_set():
            with self.lock:
                current = set(self.pairs)
            for sock in registered - current:
                selector.unregister(sock)
            for sock in current - registered:
                selector.register(sock, selectors.EVENT_READ)
            registered = current
            if self.stalled.is_set():  # the data waits unread (a readable socket would make select spin)
                time.sleep(0.01)
                continue
            for key, _ in selector.select(0.02):
                sock = key.fileobj
                if sock is self.listener:
                    self._accept()
                else:
                    self._forward(sock)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        with self.lock:
            self.pairs[client] = upstream
            self.pairs[upstream] = client
            self.connections += 1

    def _forward(self, sock: socket.socket) -> None:
        with self.lock:
            peer = self.pairs.get(sock)
        if peer is None:
            return
        try:
            data = sock.recv(1 << 16)
        except OSError:
            data = b""
        if data:
            try:
                peer.sendall(data)
                return
            except OSError:
                pass
        self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self.lock:
            peer = self.pairs.pop(sock, None)
            if peer is not None:
                self.pairs.pop(peer, None)
        for s in (sock, peer):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        """Drop every connection now (both ends see the link close)."""
        with self.lock:
            socks = list(self.pairs)
        for sock in socks:
            self._close(sock)

    def stall(self, on: bool = True) -> None:
        """Stop (or resume) forwarding: bytes wait in the kernel's buffers, the link stays open."""
        if on:
            self.stalled.set()
        else:
            self.stalled.clear()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(2)
        self.cut()
        self.listener.close()
