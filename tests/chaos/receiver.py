#!/usr/bin/env python3
"""Webhook receiver and HTTP tool of the chaos suite. POST /tool answers {"sum": a + b}
(the runs' tool); any other POST is a webhook delivery: answered 204, with one JSON line
(event id, delivery id, attempt, body) appended to the file given. Prints
{"listen":"127.0.0.1:PORT"} once it is ready. Usage: receiver.py OUT_FILE"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

out_path = sys.argv[1]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if self.path == "/tool":
            args = doc if isinstance(doc, dict) else {}
            answer = json.dumps({"sum": (args.get("a") or 0) + (args.get("b") or 0)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            return
        line = json.dumps({
            "event_id": self.headers.get("X-Evald-Event-Id"),
            "delivery_id": self.headers.get("X-Evald-Delivery-Id"),
            "attempt": self.headers.get("X-Evald-Attempt"),
            "body": doc,
        })
        with lock, open(out_path, "a") as f:
            f.write(line + "\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"listen": "127.0.0.1:%d" % server.server_address[1]}), flush=True)
server.serve_forever()
