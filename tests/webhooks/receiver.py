"""A webhook receiver for the end-to-end check (tests/webhooks/run.sh): verifies every delivery
with the Standard Webhooks Python package (not Swath's code), records each verified one as a JSON
line, and answers 500 to the first FAIL_FIRST requests so that retries are exercised.

Usage: receiver.py PORT SECRET_FILE LOG_FILE FAIL_FIRST
The secret is read from SECRET_FILE at every request (it is written once the endpoint exists).
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook

PORT, SECRET_FILE, LOG_FILE, FAIL_FIRST = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lock = threading.Lock()
requests = 0


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global requests
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with open(SECRET_FILE) as f:
            secret = f.read().strip()
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            Webhook(secret).verify(body, headers)
        except Exception as e:  # any verification failure is a failed check
            with lock, open(LOG_FILE, "a") as log:
                log.write(json.dumps({"invalid": str(e)}) + "\n")
            self.send_response(400)
            self.end_headers()
            return
        with lock:
            requests += 1
            fail = requests <= FAIL_FIRST
            if not fail:
                message = json.loads(body)
                with open(LOG_FILE, "a") as log:
                    log.write(json.dumps({"webhook_id": headers["webhook-id"], "message": message}) + "\n")
        self.send_response(500 if fail else 204)
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(PORT)), Handler).serve_forever()
