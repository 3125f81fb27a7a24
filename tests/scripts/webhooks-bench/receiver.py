"""The bench's loopback receiver: answers 204 at once and appends `<path> <monotonic ns>` per
request to LOG_FILE (no verification: tests/webhooks/ checks signatures and order).

Usage: receiver.py PORT LOG_FILE
"""

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LOG_FILE = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()
log = open(LOG_FILE, "a", buffering=1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        with lock:
            log.write(f"{self.path} {time.monotonic_ns()}\n")
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
