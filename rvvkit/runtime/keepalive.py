"""Noticing a board that vanished without closing its TCP connection (power cut, cable pulled,
a frozen kernel): without this, a read waits for the whole command timeout (600 s by default).

paramiko's own Transport.set_keepalive is no use here: its packets ask for no reply, so they
succeed as long as the local socket buffer takes them and never tell a dead peer from a quiet
one. Instead a daemon thread per connection sends, every `interval` seconds, a global request
that *wants* a reply (`keepalive@openssh.com`: OpenSSH and Dropbear answer it with
REQUEST_FAILURE, which is all we need), like OpenSSH's ServerAliveInterval. When `count_max`
intervals pass with the request unanswered and no channel data received, the transport is
closed: every blocked read or write on it (commands, SFTP, exec transfers) then fails at once,
and `lost` says why, for the error message."""
from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("rvvkit.ssh")
REQUEST = "keepalive@openssh.com"


class Keepalive:
    def __init__(self, transport, label: str, interval: float, count_max: int):
        self.transport, self.label = transport, label
        self.interval, self.count_max = interval, count_max
        self.lost = ""                      # why the connection was given up; "" while alive
        self.rx_at = time.monotonic()       # last channel data seen (Board calls saw_data)
        self._stop = threading.Event()
        if interval > 0:
            threading.Thread(target=self._watch, name=f"rvvkit-keepalive {label}",
                             daemon=True).start()

    def saw_data(self) -> None:
        """Data arrived: the board is alive even if a reply waits behind a long download."""
        self.rx_at = time.monotonic()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        answered = threading.Event()
        answered.set()                      # nothing outstanding yet
        missed, checked_at = 0, time.monotonic()
        while not self._stop.wait(self.interval):
            transport = self.transport
            if not transport.is_active():
                return
            alive = answered.is_set() or self.rx_at > checked_at
            checked_at = time.monotonic()
            if alive:
                missed = 0
            else:
                missed += 1
                if missed >= self.count_max:
                    self._give_up(missed)
                    return
            if answered.is_set():
                answered = threading.Event()
                # A sender of its own: if the link is dead and the socket buffer full, the
                # send blocks, and this thread must stay free to count and give up.
                threading.Thread(target=self._ping, args=(answered,), daemon=True,
                                 name=f"rvvkit-keepalive-send {self.label}").start()

    def _ping(self, answered: threading.Event) -> None:
        from paramiko import Message
        from paramiko.common import cMSG_GLOBAL_REQUEST
        transport = self.transport
        msg = Message()
        msg.add_byte(cMSG_GLOBAL_REQUEST)
        msg.add_string(REQUEST)
        msg.add_boolean(True)               # want_reply: the whole point
        # Transport.global_request(wait=True) would block this thread with no time limit; its
        # reply handlers set `completion_event`, which is what we watch instead. Nothing else
        # of rvvkit makes global requests on this transport.
        transport.completion_event = answered
        try:
            transport._send_user_message(msg)
        except Exception:  # the transport went away: the watcher notices is_active()
            pass

    def _give_up(self, missed: int) -> None:
        self.lost = (f"no answer to {missed} keepalives at {self.interval:g} s intervals: the "
                     "board or the network went away (keepalive_interval / "
                     "keepalive_count_max)")
        log.warning("%s: %s", self.label, self.lost)
        try:
            self.transport.close()          # wakes every read and write blocked on it
        except Exception:
            pass
