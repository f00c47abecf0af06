#!/usr/bin/env python3
"""kw-server TEST DOUBLE for the GPU machine, which has no PostgreSQL: a
loopback HTTP server that hands `kw agent` the one job in JOB_FILE on its
first claim (204 after), accepts its heartbeats and streamed stages, and
appends every other POST (a report, a profile, a failure) to RECORD_FILE as
{"path", "body"} lines. Prints its port first.

    kw_server_stand_in.py JOB_FILE RECORD_FILE
"""
import gzip
import http.server
import json
import sys
import threading

job_file, record_file = sys.argv[1], sys.argv[2]
lock = threading.Lock()
handed = False


class StandIn(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        global handed
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":  # run reports, as kw-server takes them
            data = gzip.decompress(data)
        body = json.loads(data or b"{}")
        if self.path == "/api/v1/agents/claim":
            with lock:
                first, handed = not handed, True
            if not first:
                return self.answer(204)
            with open(job_file) as f:
                job = json.load(f)
            job["state"], job["agent"], job["lease_seconds"] = "running", body["agent"], 120
            return self.answer(200, job)
        if self.path.endswith("/heartbeat") or self.path.endswith("/stages"):
            return self.answer(200, {})
        with lock, open(record_file, "a") as out:
            out.write(json.dumps({"path": self.path, "body": body}) + "\n")
        self.answer(200, {"stored": True})

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
print(server.server_address[1], flush=True)
server.serve_forever()
