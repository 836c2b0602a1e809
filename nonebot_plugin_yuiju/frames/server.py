"""uvicorn's sans-I/O WebSocket protocol (its "auto" choice with ``websockets`` installed), except
that a text frame which is not UTF-8 reaches the app as bytes. uvicorn itself decodes it, and on
invalid UTF-8 logs a traceback and closes the connection (1007) before the app reads a byte;
OneBot's adapter reads bytes and text alike, and its guarded ``json`` reports what is not UTF-8."""

from __future__ import annotations

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol


class Utf8GuardedProtocol(WebSocketsSansIOProtocol):
    def send_receive_event_to_app(self) -> None:
        if self.curr_msg_data_type == "text":
            try:
                b"".join(self.frames).decode()
            except UnicodeDecodeError:
                self.curr_msg_data_type = "bytes"  # the app's frame guard reports it
        super().send_receive_event_to_app()
