#!/usr/bin/env python3
"""Capture the real error messages of the hint calibration set (bench/hint_cases.py).

Every message is the output of a real program run here, in a scratch folder, against local
fixtures (git repositories with a bare remote, C/Rust/Java sources, a SQLite database, HTTP
and TLS servers on 127.0.0.1, a server that never answers): nothing is typed in by hand.
The scratch folder is shown as /home/dev/work in the messages, and the local servers listen
on fixed ports, so a re-capture on another machine differs only where the programs'
versions word things differently.

    python bench/hint_data/capture.py            # adds new scenarios to captured.json
    python bench/hint_data/capture.py --only ID  # one scenario, printed

Needs bash, git, python3 (with requests), pip, node/npm, gcc, cargo, javac, make, sqlite3,
psql, docker, kubectl, ssh, curl, openssl, jq, tar. A scenario whose program is missing is
left out with a warning (the set keeps what was captured before).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "captured.json"
SHOWN = "/home/dev/work"
HTTP_PORT, TLS_PORT, SLOW_PORT = 18480, 18443, 18481
HEAD, TAIL, MAX_CHARS = 14, 10, 2000  # what an agent's tool result keeps of a long output

PY_REQ = "python3 - <<'EOF'\nimport requests\n{}\nEOF"

# id -> shell command, run in the scratch folder (fixtures: setup()).
SCENARIOS: dict[str, str] = {
    # --- shell (bash) -------------------------------------------------------------------
    "sh-perm-deploy": "./deploy.sh",
    "sh-perm-sudo": "sudo -n ./deploy.sh",
    "sh-perm-backup": "./scripts/backup.sh --full",
    "sh-perm-write": "echo x > /proc/version",
    "sh-notfound-jq": "PATH=/usr/bin:/bin; jqq '.items' data.json",
    "sh-notfound-compose": "docker-compose up -d",
    "sh-notfound-compose2": "docker-compose -f docker-compose.prod.yml pull",
    "sh-notfound-yarn": "yarnpkg install",
    "sh-nofile-cd": "cd /home/dev/work/missing-dir",
    "sh-nofile-cat": "cat config/settings.local.yaml",
    "sh-isdir-rm": "rm build",
    "sh-syntax": "bash -c 'if [ -f x ] then echo y; fi'",
    "sh-unbound": "bash -uc 'echo $DEPLOY_TARGET'",
    "sh-perm-build": "./build.sh release",
    "sh-perm-migrate": "bash -c 'cd scripts && ./migrate.sh up'",
    "sh-mkdir-perm": "mkdir /proc/app-cache",
    "sh-chmod-perm": "chmod 600 /proc/version",
    "sh-ls-missing": "ls dist/",
    "sh-cp-missing": "cp .env.example .env",
    "sh-python-missing-file": "python3 main.py",
    "sh-compose-version": "docker-compose --version",
    # --- git ----------------------------------------------------------------------------
    "git-nonrepo": "cd /tmp && git status",
    "git-nonrepo-log": "cd /tmp && git log --oneline -5",
    "git-nonrepo-diff": "cd / && git diff --stat",
    "git-push-rejected-hotfix": "cd clone3 && git push origin master",
    "git-rebase-conflict": "cd conflict2 && git rebase topic",
    "git-identity-tag": "cd identtag && env -u GIT_AUTHOR_NAME -u GIT_AUTHOR_EMAIL -u "
                        "GIT_COMMITTER_NAME -u GIT_COMMITTER_EMAIL git tag -a v1.0 -m release",
    "git-push-rejected": "cd clone2 && git push origin master",
    "git-push-rejected-develop": "cd clone2 && git push origin master:develop",
    "git-unrelated-histories": "cd conflict && git pull --no-rebase ../clone1 master",
    "git-local-changes": "cd clone3 && echo dirty >> a.txt && git pull --no-rebase -q origin "
                         "master",
    "git-conflict-merge": "cd conflict && git merge topic",
    "git-identity": "cd noident && env -u GIT_AUTHOR_NAME -u GIT_AUTHOR_EMAIL -u "
                    "GIT_COMMITTER_NAME -u GIT_COMMITTER_EMAIL git commit -q -m 'first'",
    "git-pathspec": "cd clone1 && git checkout release/2.0",
    "git-remote-missing": "cd clone1 && git push upstream master",
    "git-clone-refused": "git clone https://127.0.0.1:9/acme/api.git",
    "git-nothing-to-commit": "cd clone1 && git commit -m 'wip'",
    "git-detached-push": "cd detached && git push origin HEAD",
    "git-untracked-overwrite": "cd overwrite && git checkout other",
    # --- pip ----------------------------------------------------------------------------
    "pip-no-version": "pip install --no-cache-dir 'requests==99.0' 2>&1 | grep -v '^WARNING'",
    "pip-no-version-django": "pip install --no-cache-dir 'django==9.9.9' 2>&1 | grep -v '^WARNING'",
    "pip-no-dist": "pip install --no-cache-dir nonexistent-package-zzz 2>&1 | grep -v '^WARNING'",
    "pip-no-reqfile": "pip install -r requirements-dev.txt",
    "pip-bad-spec": "pip install 'numpy=1.2'",
    "pip-no-version-flask": "pip install --no-cache-dir 'flask==0.0.1' 2>&1 | grep -v '^WARNING'",
    "pip-unknown-command": "pip instal requests",
    # --- Python tracebacks --------------------------------------------------------------
    "py-module-requests": "venv/bin/python -c 'import requests'",
    "py-module-requests-app": "venv/bin/python fetch_prices.py",
    "py-module-yaml": "venv/bin/python -c 'import yaml'",
    "py-module-dotenv": "venv/bin/python app_dotenv.py",
    "py-module-from": "venv/bin/python -c 'from flask import Flask'",
    "py-type-add": "python3 -c '1 + \"a\"'",
    "py-type-call": "python3 -c 'x = 3; x()'",
    "py-key-user": "python3 -c 'd = {}; d[\"user_id\"]'",
    "py-attr-none": "python3 -c 'x = None; x.split(\",\")'",
    "py-value-int": "python3 -c 'int(\"12a\")'",
    "py-index": "python3 -c '[1, 2][5]'",
    "py-json-decode": "python3 -c 'import json; json.loads(\"{bad json}\")'",
    "py-json-html": "python3 -c 'import json; json.loads(\"<!DOCTYPE html><html>\")'",
    "py-json-empty": "python3 -c 'import json; json.loads(\"\")'",
    "py-unicode": "python3 -c 'open(\"latin1.csv\", encoding=\"utf-8\").read()'",
    "py-unicode-pandas": "python3 -c 'b\"caf\\xe9 au lait\".decode(\"utf-8\")'",
    "py-recursion": "python3 -c 'import sys; sys.setrecursionlimit(60)\ndef walk(n): return "
                    "walk(n + 1)\nwalk(0)'",
    "py-recursion-json": "python3 -c 'import json; a = []; a.append(a); json.dumps(a)'",
    "py-filenotfound": "python3 -c 'open(\"config.yaml\")'",
    "py-filenotfound-data": "python3 -c 'import csv; open(\"data/input.csv\")'",
    "py-syntax": "python3 -c 'def f(:\n    pass'",
    "py-indent": "python3 -c 'if True:\nprint(1)'",
    "py-zero": "python3 -c 'print(10 / 0)'",
    "py-import-name": "python3 -c 'from json import loads_fast'",
    "py-sqlite-no-table": "python3 -c 'import sqlite3; sqlite3.connect(\"app.db\").execute("
                          "\"SELECT * FROM invoices\")'",
    "py-unicode-lines": "python3 -c 'open(\"export.txt\").readlines()'",
    "py-recursion-tree": "python3 -c 'import sys; sys.setrecursionlimit(80)\nclass N:\n    "
                         "def __init__(s): s.kids = [s]\n    def size(s): return 1 + sum(k.size()"
                         " for k in s.kids)\nN().size()'",
    # --- Node / npm ---------------------------------------------------------------------
    "npm-missing-script": "cd web && npm run build",
    "npm-missing-script-test": "cd web && npm run test:e2e",
    "npm-missing-script-lint": "cd web && npm run lint",
    "npm-ci-omit": "cd web && npm ci --omit=dev",
    "npm-no-package": "cd /tmp && mkdir -p nopkg-dir && cd nopkg-dir && npm run build",
    "node-cannot-find-lodash": "cd web && node -e 'const _ = require(\"lodash\")'",
    "node-cannot-find-local": "cd web && node -e 'require(\"./config\")'",
    "npm-ci-nolock": "cd web && npm ci",
    "npm-404": "cd web && timeout 60 npm install left-pad-nonexistent-zz",
    "node-cannot-find-express": "cd web && node -e 'require(\"express\")'",
    "node-cannot-find-dotenv": "cd web && node server.js",
    "node-syntax": "cd web && node -e 'const x = {;'",
    "node-undefined-prop": "cd web && node -e 'const u = undefined; console.log(u.name)'",
    # --- compilers ----------------------------------------------------------------------
    "gcc-undeclared": "gcc -c undeclared.c",
    "gcc-header": "gcc -c uses_foo.c",
    "gcc-header-openssl": "gcc -c uses_ssl.c",
    "gcc-undefined-sqrt": "gcc uses_math.c -o uses_math",
    "gcc-undefined-pthread": "gcc uses_curl.c -o uses_curl",
    "gcc-undefined-log": "gcc -O2 stats.c -o stats",
    "gcc-header-zlib": "gcc -c uses_zlib.c",
    "cargo-moved": "cd rs && cp variants/moved.rs src/main.rs && cargo build -q --offline",
    "cargo-moved-vec": "cd rs && cp variants/moved_vec.rs src/main.rs && cargo build -q --offline",
    "cargo-unresolved-serde": "cd rs && cp variants/serde.rs src/main.rs && cargo build -q "
                              "--offline",
    "cargo-unresolved-tokio": "cd rs && cp variants/tokio.rs src/main.rs && cargo build -q "
                              "--offline",
    "cargo-mismatched": "cd rs && cp variants/mismatch.rs src/main.rs && cargo build -q "
                        "--offline",
    "cargo-unresolved-rand": "cd rs && cp variants/rand.rs src/main.rs && cargo build -q "
                             "--offline",
    "javac-symbol-scanner": "javac -d out java/Ask.java",
    "javac-symbol-list": "javac -d out java/Lists.java",
    "javac-symbol-map": "javac -d out java/Maps.java",
    "javac-incompatible": "javac -d out java/Types.java",
    "make-no-rule": "make -C proj build",
    "make-no-rule-test": "make -C proj test-integration",
    "make-separator": "make -C badmake",
    "make-separator2": "make -C badmake2 install",
    "make-no-rule-deploy": "make -C proj deploy",
    # --- databases ----------------------------------------------------------------------
    "sqlite-no-table": "sqlite3 app.db 'SELECT id, email FROM users LIMIT 5'",
    "sqlite-no-table-orders": "sqlite3 app.db 'INSERT INTO orders (user_id) VALUES (1)'",
    "sqlite-unique": "sqlite3 app.db \"INSERT INTO accounts (email) VALUES ('a@x.io')\"",
    "sqlite-unique-py": "python3 -c 'import sqlite3; c = sqlite3.connect(\"app.db\"); "
                        "c.execute(\"INSERT INTO accounts (email) VALUES (?)\", (\"a@x.io\",))'",
    "sqlite-syntax": "sqlite3 app.db 'SELEC * FROM accounts'",
    "sqlite-no-column": "sqlite3 app.db 'SELECT name FROM accounts'",
    "sqlite-readonly": "sqlite3 ro/app.db \"INSERT INTO t VALUES (1)\"",
    "sqlite-unique-username": "sqlite3 app.db \"INSERT INTO members (username) VALUES "
                              "('ada')\"",
    "pgdump-refused": "pg_dump -h 127.0.0.1 -p 9 -U app appdb > /dev/null",
    "psql-refused": "psql -h 127.0.0.1 -p 9 -U app appdb -c 'select 1'",
    "psql-refused-socket": "psql -U postgres -c 'select 1'",
    "psql-py-refused": "python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\","
                       " 5439))'",
    # --- containers ---------------------------------------------------------------------
    "docker-daemon": "docker ps",
    "docker-daemon-build": "docker build -t api:dev .",
    "docker-daemon-compose": "docker compose up -d",
    "docker-daemon-run": "docker run --rm hello-world",
    "docker-daemon-images": "docker images",
    "kubectl-refused": "kubectl get pods 2>&1 | tail -1",
    "kubectl-refused-apply": "kubectl apply -f k8s/deploy.yaml 2>&1 | tail -2",
    "kubectl-nofile": "kubectl apply -f k8s/missing.yaml --validate=false 2>&1 | tail -1",
    "kubectl-refused-nodes": "kubectl get nodes 2>&1 | tail -1",
    "kubectl-refused-logs": "kubectl logs deploy/api 2>&1 | tail -1",
    # --- ssh ----------------------------------------------------------------------------
    "ssh-refused": "ssh -o BatchMode=yes -p 9 deploy@127.0.0.1 uptime",
    "ssh-resolve": "ssh -o BatchMode=yes deploy@build-01.internal.invalid uptime",
    "ssh-keyfile": "ssh -o BatchMode=yes -i ~/.ssh/id_deploy_missing -p 9 127.0.0.1 true",
    "scp-refused": "scp -o BatchMode=yes -P 9 deploy.sh deploy@127.0.0.1:/srv/app/",
    "rsync-refused": "rsync -e 'ssh -o BatchMode=yes -p 9' -a dist/ deploy@127.0.0.1:/srv/www/",
    # --- HTTP clients -------------------------------------------------------------------
    "curl-resolve": "curl -sS https://api.internal.invalid/v1/users",
    "curl-resolve-2": "curl -sS -o /dev/null https://registry.internal.invalid/v2/",
    "curl-refused": f"curl -sS http://127.0.0.1:{HTTP_PORT + 7}/health",
    "curl-selfsigned": f"curl -sS https://localhost:{TLS_PORT}/",
    "curl-404": f"curl -sSf http://127.0.0.1:{HTTP_PORT}/v1/items/42",
    "curl-401": f"curl -sSf http://127.0.0.1:{HTTP_PORT}/v1/me",
    "curl-429": f"curl -sSf http://127.0.0.1:{HTTP_PORT}/v1/search?q=x",
    "curl-500": f"curl -sSf http://127.0.0.1:{HTTP_PORT}/v1/orders",
    "curl-timeout": f"curl -sS --max-time 2 http://127.0.0.1:{SLOW_PORT}/report",
    "req-refused": PY_REQ.format(f"requests.get('http://localhost:{HTTP_PORT + 7}/api/users')"),
    "req-refused-8000": PY_REQ.format("requests.post('http://127.0.0.1:8000/graphql', "
                                      "json={'query': '{ me { id } }'})"),
    "req-401": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/me')\n"
                             "r.raise_for_status()"),
    "req-401-token": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/repos',"
                                   " headers={'Authorization': 'Bearer expired'})\n"
                                   "r.raise_for_status()"),
    "req-429": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/search?q=x')"
                             "\nr.raise_for_status()"),
    "req-429-2": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/rate/"
                               "limited')\nr.raise_for_status()"),
    "req-404": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/items/42')\n"
                             "r.raise_for_status()"),
    "req-500": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/orders')\n"
                             "r.raise_for_status()"),
    "req-timeout": PY_REQ.format(f"requests.get('http://127.0.0.1:{SLOW_PORT}/report', "
                                 "timeout=2)"),
    "req-timeout-post": PY_REQ.format(f"requests.post('http://127.0.0.1:{SLOW_PORT}/ingest', "
                                      "json={}, timeout=3)"),
    "req-ssl": PY_REQ.format(f"requests.get('https://localhost:{TLS_PORT}/api')"),
    "urllib-ssl": f"python3 -c 'import urllib.request; urllib.request.urlopen(\"https://"
                  f"localhost:{TLS_PORT}/\")' 2>&1 | tail -1",
    "req-resolve": PY_REQ.format("requests.get('https://metrics.internal.invalid/v1/query')"),
    "req-json-html": PY_REQ.format(f"requests.get('http://127.0.0.1:{HTTP_PORT}/v1/orders/"
                                   "html').json()"),
    # --- more of the same failures, and more unrelated ones -----------------------------
    "py-module-numpy": "venv/bin/python -c 'import numpy as np'",
    "sh-perm-lint": "./tools/lint.sh --fix",
    "node-cannot-find-axios": "cd web && node -e 'const axios = require(\"axios\")'",
    "cargo-unresolved-anyhow": "cd rs && cp variants/anyhow.rs src/main.rs && cargo build -q "
                               "--offline",
    "docker-daemon-pull": "docker pull redis:7",
    "curl-timeout-export": f"curl -sS --max-time 3 http://127.0.0.1:{SLOW_PORT}/export.csv",
    "git-identity-merge": "cd identmerge && env -u GIT_AUTHOR_NAME -u GIT_AUTHOR_EMAIL -u "
                          "GIT_COMMITTER_NAME -u GIT_COMMITTER_EMAIL git merge --no-ff topic",
    "make-separator3": "make -C badmake3 test",
    "py-key-env": "python3 -c 'import os; os.environ[\"API_KEY\"]'",
    "py-assert": "python3 -c 'assert 1 == 2, \"checksum mismatch\"'",
    "node-json-parse": "cd web && node -e 'JSON.parse(\"{bad\")'",
    "git-branch-exists": "cd clone1 && git checkout -b master",
    "sqlite-not-null": "sqlite3 app.db 'INSERT INTO members (username) VALUES (NULL)'",
    "curl-write-fail": f"curl -sS http://127.0.0.1:{HTTP_PORT}/v1/orders/html -o "
                       "/nonexistent/dir/out.html",
    "kubectl-context": "kubectl get pods --context staging-eu 2>&1 | tail -1",
    "gcc-missing-source": "gcc -o app main_missing.c",
    "make-no-dir": "make -C services/api",
    "tar-create-fail": "tar czf /nonexistent/backup.tgz scripts",
    # --- held out (captured after the first report, for the second fit's report) ---------
    "h-py-module-pandas": "venv/bin/python -c 'import pandas as pd'",
    "h-py-module-bs4": "venv/bin/python -c 'from bs4 import BeautifulSoup'",
    "h-py-m-pytest": "venv/bin/python -m pytest -q",
    "h-sh-perm-release": "./scripts/release.sh v2",
    "h-sh-perm-start": "./bin/start --port 8080",
    "h-compose-logs": "docker-compose logs -f api",
    "h-git-push-develop": "cd clone3 && git push origin master:develop",
    "h-git-nonrepo-status": "cd /var && git status -s",
    "h-git-nonrepo-branch": "cd /tmp && git branch -a",
    "h-git-conflict-feature": "cd conflict3 && git merge feature",
    "h-git-identity-commit": "cd identnew && env -u GIT_AUTHOR_NAME -u GIT_AUTHOR_EMAIL -u "
                             "GIT_COMMITTER_NAME -u GIT_COMMITTER_EMAIL git commit -q -m init",
    "h-pip-no-version-numpy": "pip install --no-cache-dir 'numpy==0.0.1' 2>&1 | "
                              "grep -v '^WARNING'",
    "h-npm-missing-start": "cd web && npm run start:prod",
    "h-node-cannot-find-chalk": "cd web && node -e 'require(\"chalk\")'",
    "h-npm-ci-scripts": "cd web && npm ci --ignore-scripts",
    "h-make-separator-docs": "make -C badmake4 docs",
    "h-make-no-rule-release": "make -C proj release",
    "h-gcc-header-yaml": "gcc -c uses_yaml.c",
    "h-gcc-undefined-exp": "gcc growth.c -o growth",
    "h-cargo-moved-config": "cd rs && cp variants/moved_config.rs src/main.rs && cargo build "
                            "-q --offline",
    "h-cargo-unresolved-regex": "cd rs && cp variants/regex.rs src/main.rs && cargo build -q "
                                "--offline",
    "h-javac-symbol-random": "javac -d out java/Dice.java",
    "h-docker-daemon-ps": "docker ps -a",
    "h-docker-daemon-info": "docker info 2>&1 | tail -3",
    "h-kubectl-svc": "kubectl get svc 2>&1 | tail -1",
    "h-kubectl-describe": "kubectl describe pod api-0 2>&1 | tail -1",
    "h-ssh-refused-git": "ssh -o BatchMode=yes -p 9 git@127.0.0.1",
    "h-psql-refused-dt": "psql -h 127.0.0.1 -p 9 -U app appdb -c '\\dt'",
    "h-curl-resolve-grafana": "curl -sS https://grafana.internal.invalid/api/health",
    "h-git-clone-resolve": "git clone https://git.internal.invalid/acme/api.git",
    "h-curl-selfsigned-health": f"curl -sS https://localhost:{TLS_PORT}/health",
    "h-req-429-other": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/rate/"
                                     "other')\nr.raise_for_status()"),
    "h-req-401-me": PY_REQ.format(f"r = requests.get('http://127.0.0.1:{HTTP_PORT}/v1/me', "
                                  "params={'fields': 'name'})\nr.raise_for_status()"),
    "h-req-refused-healthz": PY_REQ.format(f"requests.get('http://localhost:{HTTP_PORT + 7}"
                                           "/healthz')"),
    "h-req-timeout-slow": PY_REQ.format(f"requests.get('http://127.0.0.1:{SLOW_PORT}/slow', "
                                        "timeout=1)"),
    "h-urllib-json-html": f"python3 -c 'import json, urllib.request; json.loads(urllib.request"
                          f".urlopen(\"http://127.0.0.1:{HTTP_PORT}/v1/orders/html\").read())'",
    "h-sqlite-no-table-payments": "sqlite3 app.db 'SELECT * FROM payments'",
    "h-sqlite-unique-members-py": "python3 -c 'import sqlite3; c = sqlite3.connect(\"app.db\")"
                                  "; c.execute(\"INSERT INTO members (username) VALUES (?)\","
                                  " (\"ada\",))'",
    "h-py-unicode-export": "python3 -c 'open(\"export.txt\", encoding=\"utf-8\").read()'",
    "h-py-recursion-fib": "python3 -c 'import sys; sys.setrecursionlimit(90)\ndef fib(n): "
                          "return fib(n - 1) + fib(n - 2) if n > 1 else n\nfib(500)'",
    "h-py-filenotfound-toml": "python3 -c 'open(\"settings.toml\")'",
    "h-tar-not-gzip-notes": "tar xzf notes.txt -C restore/",
    "h-jq-html-data": "jq .data page.html",
    # unrelated
    "h-py-name": "python3 -c 'print(total_count)'",
    "h-py-exists": "python3 -c 'import os; os.mkdir(\"scripts\")'",
    "h-py-isdir": "python3 -c 'open(\"scripts\").read()'",
    "h-py-unbound": "python3 -c 'def f():\n    x += 1\nf()'",
    "h-py-dict-size": "python3 -c 'd = {1: 1}\nfor k in d: d[k + 1] = 0'",
    "h-py-not-serializable": "python3 -c 'import json, datetime; json.dumps(datetime.date.today"
                             "())'",
    "h-py-none-subscript": "python3 -c 'x = None; x[0]'",
    "h-git-unknown-revision": "cd clone1 && git log nosuchref",
    "h-git-refspec": "cd clone1 && git push origin nosuchbranch",
    "h-git-dest-exists": "git clone -q remote.git clone1",
    "h-npm-ejsonparse": "cd badjson && npm install",
    "h-node-reference": "cd web && node -e 'console.log(totalCount)'",
    "h-node-stack": "cd web && node -e 'function f(){ return f() } f()'",
    "h-gcc-expected-semicolon": "gcc -c missing_semicolon.c",
    "h-cargo-cannot-find-value": "cd rs && cp variants/value.rs src/main.rs && cargo build -q "
                                 "--offline",
    "h-javac-semicolon": "javac -d out java/Semi.java",
    "h-make-recipe-failed": "make -C failing",
    "h-sqlite-check": "sqlite3 app.db 'CREATE TABLE IF NOT EXISTS ages (n INTEGER CHECK (n > 0))"
                      "; INSERT INTO ages VALUES (-1)'",
    "h-sqlite-mismatch": "sqlite3 app.db 'INSERT INTO accounts (id, email) VALUES (\"x\", "
                         "\"b@x.io\")'",
    "h-docker-bad-reference": "docker run UPPERCASE/Image:latest",
    "h-kubectl-unknown-command": "kubectl gett pods 2>&1 | head -3",
    "h-ssh-bad-port": "ssh -p abc 127.0.0.1",
    "h-curl-bad-format": "curl -sS 'http://exa mple.com/'",
    "h-tar-not-tar": "tar xf notes.txt",
    "h-unzip-not-zip": "unzip -q notes.txt",
    "h-jq-syntax": "echo '{}' | jq '.a |'",
    "h-sed-unterminated": "echo x | sed -e 's/x/'",
    "h-grep-unmatched": "grep -E '(' notes.txt",
    "h-find-missing": "find /nope -name '*.py'",
    "h-ln-exists": "ln -s notes.txt deploy.sh",
    # --- near misses (#50, captured before the subject rule was tuned): the same failure
    # naming another module, package, command, file or host than a record (no hint), and
    # the same failure naming the same one (the record's hint) ----------------------------
    "n-py-module-httpx": "venv/bin/python -c 'from httpx import Client'",
    "n-py-module-toml": "venv/bin/python -c 'import tomli_w'",
    "n-py-module-requests-from": "venv/bin/python -c 'from requests.adapters import "
                                 "HTTPAdapter'",
    "n-py-module-requests-as": "venv/bin/python -c 'import requests as rq'",
    "n-sh-notfound-terraform": "terraform plan -out tf.plan",
    "n-sh-notfound-kubectx": "kubectx staging",
    "n-sh-compose-down": "docker-compose down --volumes",
    "n-sh-compose-exec": "docker-compose exec api sh",
    "n-node-cannot-find-uuid": "cd web && node -e 'require(\"uuid\")'",
    "n-node-dotenv-config": "cd web && node -e 'require(\"dotenv\").config()'",
    "n-curl-resolve-vault": "curl -sS https://vault.internal.invalid/v1/sys/health",
    "n-curl-resolve-registry-tags": "curl -sS https://registry.internal.invalid/v2/api/tags/list",
    "n-py-filenotfound-csv": "python3 -c 'open(\"report.csv\").read()'",
    "n-py-filenotfound-config": "python3 -c 'import os; open(\"config.yaml\").read()'",
    "n-sh-perm-cleanup": "printf '#!/bin/sh\\n' > cleanup.sh && chmod 644 cleanup.sh && "
                         "./cleanup.sh",
    "n-sh-perm-deploy-dry": "./deploy.sh --dry-run",
    "n-gcc-header-png": "printf '#include <png_missing/png.h>\\nint main(void) { return 0; }\\n' "
                        "> uses_png.c && gcc -c uses_png.c",
    "n-gcc-header-openssl-main": "printf '#include <openssl/ssl_missing.h>\\nint main(void) "
                                 "{ return 0; }\\n' > tls_main.c && gcc -c tls_main.c",
    # --- archives and JSON tools --------------------------------------------------------
    "tar-not-gzip": "tar xzf release.tar.gz",
    "tar-not-gzip-2": "tar -xzvf backup-2024.tgz -C restore/",
    "tar-nofile": "tar xf missing.tar",
    "jq-html": "jq '.items[] | .id' page.html",
    "jq-html-curl": f"curl -s http://127.0.0.1:{HTTP_PORT}/v1/orders/html | jq .total",
    "jq-null-iterate": "echo '{\"items\": null}' | jq '.items[]'",
    "jq-index-string": "echo '\"text\"' | jq '.name'",
    "unzip-missing": "unzip bundle.zip",
    "tar-not-gzip-3": "tar xzf notes.txt",
    "jq-text-log": "jq . error.log",
    "curl-malformed": "curl -sS 'http://[::1'",
}


class Handler(http.server.BaseHTTPRequestHandler):
    """The local API the HTTP scenarios talk to."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        if path.endswith("/html"):
            self._send(200, b"<!DOCTYPE html><html><body>Bad gateway</body></html>", "text/html")
        elif path.startswith("/v1/items"):
            self._send(404, b'{"error": "not found"}')
        elif path in ("/v1/me", "/v1/repos"):
            self._send(401, b'{"error": "token expired"}', extra={"WWW-Authenticate": "Bearer"})
        elif path.startswith(("/v1/search", "/v1/rate")):
            self._send(429, b'{"error": "rate limited"}', extra={"Retry-After": "30"})
        else:
            self._send(500, b'{"error": "internal"}')

    do_POST = do_GET

    def _send(self, code: int, body: bytes, kind: str = "application/json",
              extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


def _silent_server(port: int) -> socket.socket:
    """Accepts connections and never answers (timeouts)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return sock


def _tls_server(port: int, work: Path) -> http.server.HTTPServer:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-keyout", str(work / "key.pem"),
                    "-out", str(work / "cert.pem")], check=True, capture_output=True)
    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "cert.pem", work / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def sh(cmd: str, cwd: Path) -> None:
    subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True, capture_output=True)


def setup(work: Path) -> None:
    """The fixtures every scenario runs against."""
    git = ("git -c user.name=dev -c user.email=dev@example.com -c init.defaultBranch=master "
           "-c advice.detachedHead=false")
    (work / "deploy.sh").write_text("#!/bin/sh\necho deploying\n")
    (work / "scripts").mkdir()
    (work / "scripts" / "backup.sh").write_text("#!/bin/sh\necho backup\n")
    (work / "build").mkdir()
    sh(f"{git} init -q --bare remote.git && {git} clone -q remote.git clone1 && cd clone1 && "
       f"echo a > a.txt && git add a.txt && {git} commit -q -m one && git push -q origin master"
       f" && cd .. && {git} clone -q remote.git clone2 && {git} clone -q remote.git clone3 && "
       f"cd clone1 && echo b >> a.txt && {git} commit -qam two && git push -q origin master"
       f" && git push -q origin master:develop && "
       f"cd ../clone2 && echo c >> a.txt && {git} commit -qam three && "
       f"cd ../clone3 && echo d >> a.txt && {git} commit -qam four", work)
    sh(f"{git} init -q conflict && cd conflict && echo base > f.txt && git add f.txt && "
       f"{git} commit -qm base && git checkout -qb topic && echo topic > f.txt && "
       f"{git} commit -qam topic && git checkout -q master && echo main > f.txt && "
       f"{git} commit -qam main", work)
    sh("git init -q noident && cd noident && echo x > x && git add x", work)
    sh(f"{git} clone -q remote.git detached && cd detached && git checkout -q HEAD~0 --detach "
       f"&& echo e >> a.txt && {git} commit -qam five && git remote set-url origin "
       f"{work}/nowhere.git", work)
    sh(f"{git} init -q overwrite && cd overwrite && echo x > keep && git add keep && "
       f"{git} commit -qm x && git checkout -qb other && echo tracked > notes.txt && "
       f"git add notes.txt && {git} commit -qm n && git checkout -q master && "
       "echo local > notes.txt", work)
    sh("python3 -m venv --without-pip venv", work)
    (work / "fetch_prices.py").write_text("import json\nimport requests\n\n"
                                          "print(requests.get('https://x').json())\n")
    (work / "app_dotenv.py").write_text("import os\nfrom dotenv import load_dotenv\n"
                                        "load_dotenv()\n")
    (work / "latin1.csv").write_bytes("name,city\nJosé,São Paulo\n".encode("latin-1"))
    (work / "data").mkdir()
    web = work / "web"
    web.mkdir()
    (web / "package.json").write_text('{"name": "web", "version": "1.0.0", "scripts": '
                                      '{"start": "node server.js"}}\n')
    (web / "server.js").write_text("require('dotenv').config();\nconsole.log('up');\n")
    (work / "undeclared.c").write_text("int main(void) {\n  return retries;\n}\n")
    (work / "uses_foo.c").write_text("#include <foo/config.h>\nint main(void) { return 0; }\n")
    (work / "uses_ssl.c").write_text("#include <openssl/ssl_missing.h>\nint main(void) "
                                     "{ return 0; }\n")
    (work / "uses_math.c").write_text("#include <math.h>\nint main(int c, char **v) "
                                      "{ return (int)sqrt(c); }\n")
    (work / "uses_curl.c").write_text("#include <math.h>\nint main(int c, char **v) "
                                      "{ return (int)pow(c, 2.5) + (int)floor(c / 3.0); }\n")
    sh("cargo new -q --vcs none rs && mkdir rs/variants", work)
    variants = {
        "moved.rs": 'fn main() {\n    let name = String::from("api");\n    let owner = name;\n'
                    '    println!("{} {}", name, owner);\n}\n',
        "moved_vec.rs": "fn total(v: Vec<i32>) -> i32 { v.iter().sum() }\nfn main() {\n"
                        "    let items = vec![1, 2, 3];\n    let t = total(items);\n"
                        '    println!("{} {:?}", t, items);\n}\n',
        "serde.rs": "use serde::Serialize;\n#[derive(Serialize)]\nstruct User { id: u32 }\n"
                    "fn main() {}\n",
        "tokio.rs": "use tokio::time::sleep;\nfn main() {}\n",
        "rand.rs": "use rand::Rng;\nfn main() { let n: u8 = rand::thread_rng().gen(); }\n",
        "anyhow.rs": "use anyhow::Result;\nfn main() -> Result<()> { Ok(()) }\n",
        "moved_config.rs": "struct Config { name: String }\nfn load(c: Config) {}\nfn main() {"
                           "\n    let cfg = Config { name: String::new() };\n    load(cfg);\n"
                           "    println!(\"{}\", cfg.name);\n}\n",
        "regex.rs": "use regex::Regex;\nfn main() {}\n",
        "value.rs": "fn main() {\n    println!(\"{}\", retries);\n}\n",
        "mismatch.rs": 'fn main() {\n    let port: u16 = "8080";\n    println!("{}", port);\n}\n',
    }
    for name, text in variants.items():
        (work / "rs" / "variants" / name).write_text(text)
    (work / "build.sh").write_text("#!/bin/sh\nmake\n")
    (work / "scripts" / "migrate.sh").write_text("#!/bin/sh\necho migrate\n")
    (work / ".env.missing").write_text("")
    sh(f"{git} init -q conflict2 && cd conflict2 && echo base > f.txt && git add f.txt && "
       f"{git} commit -qm base && git checkout -qb topic && echo topic > f.txt && "
       f"{git} commit -qam topic && git checkout -q master && echo main > f.txt && "
       f"{git} commit -qam main", work)
    sh("git init -q identtag && cd identtag && echo x > x && git add x && git -c user.name=d "
       "-c user.email=d@x commit -qm x", work)
    (work / "uses_zlib.c").write_text("#include <zlib_missing.h>\nint main(void) "
                                      "{ return 0; }\n")
    (work / "stats.c").write_text("#include <math.h>\nint main(int c, char **v) "
                                  "{ return (int)log10(c * 1000.0) + (int)ceil(c / 7.0); }\n")
    (work / "export.txt").write_bytes("Müller;Köln\n".encode("cp1252") + b"\x81\n")
    (work / "notes.txt").write_text("just text\n")
    (work / "error.log").write_text("ERROR 2024-01-01 something broke\n")
    (work / "tools").mkdir()
    (work / "tools" / "lint.sh").write_text("#!/bin/sh\nruff check .\n")
    (work / "badmake3").mkdir()
    (work / "badmake3" / "Makefile").write_text("test:\n  pytest -q\n")
    sh(f"{git} init -q identmerge && cd identmerge && echo a > a && git add a && "
       f"{git} commit -qm a && git checkout -qb topic && echo b > b && git add b && "
       f"{git} commit -qm b && git checkout -q master", work)
    (work / "scripts" / "release.sh").write_text("#!/bin/sh\necho release\n")
    (work / "bin").mkdir()
    (work / "bin" / "start").write_text("#!/bin/sh\necho start\n")
    sh(f"{git} init -q conflict3 && cd conflict3 && echo base > g.txt && git add g.txt && "
       f"{git} commit -qm base && git checkout -qb feature && echo feature > g.txt && "
       f"{git} commit -qam feature && git checkout -q master && echo master > g.txt && "
       f"{git} commit -qam master", work)
    sh("git init -q identnew && cd identnew && echo x > x && git add x", work)
    (work / "badmake4").mkdir()
    (work / "badmake4" / "Makefile").write_text("docs:\n   mkdocs build\n")
    (work / "failing").mkdir()
    (work / "failing" / "Makefile").write_text("all:\n\tfalse\n")
    (work / "uses_yaml.c").write_text("#include <yaml_missing/yaml.h>\nint main(void) "
                                      "{ return 0; }\n")
    (work / "growth.c").write_text("#include <math.h>\nint main(int c, char **v) "
                                   "{ return (int)exp(c * 0.5); }\n")
    (work / "missing_semicolon.c").write_text("int main(void) {\n  int x = 1\n  return x;\n}\n")
    (work / "badjson").mkdir()
    (work / "badjson" / "package.json").write_text('{"name": "x", "version": "1.0.0",}\n')
    (work / "java").mkdir()
    (work / "java" / "Dice.java").write_text(
        "public class Dice {\n    static Random rng = new Random();\n}\n")
    (work / "java" / "Semi.java").write_text(
        "public class Semi {\n    int x = 1\n}\n")
    (work / "java" / "Ask.java").write_text(
        "public class Ask {\n    public static void main(String[] args) {\n"
        "        Scanner in = new Scanner(System.in);\n    }\n}\n")
    (work / "java" / "Lists.java").write_text(
        "public class Lists {\n    public static void main(String[] args) {\n"
        "        List<String> names = new ArrayList<>();\n    }\n}\n")
    (work / "java" / "Maps.java").write_text(
        "public class Maps {\n    static Map<String, Integer> counts = new HashMap<>();\n}\n")
    (work / "java" / "Types.java").write_text(
        "public class Types {\n    public static void main(String[] args) {\n"
        '        int port = "8080";\n    }\n}\n')
    (work / "proj").mkdir()
    (work / "proj" / "Makefile").write_text("all:\n\t@echo building\n\n.PHONY: all\n")
    (work / "badmake").mkdir()
    (work / "badmake" / "Makefile").write_text("all:\n    gcc -o app main.c\n")
    (work / "badmake2").mkdir()
    (work / "badmake2" / "Makefile").write_text("install:\n        cp app /usr/local/bin/\n")
    sh("sqlite3 app.db 'CREATE TABLE accounts (id INTEGER PRIMARY KEY, email TEXT UNIQUE); "
       "INSERT INTO accounts (email) VALUES (\"a@x.io\"); CREATE TABLE members (id INTEGER "
       "PRIMARY KEY, username TEXT NOT NULL UNIQUE); INSERT INTO members (username) VALUES "
       "(\"ada\");'", work)
    sh("mkdir ro && sqlite3 ro/app.db 'CREATE TABLE t (x)' && chmod 444 ro/app.db && "
       "chmod 555 ro", work)
    (work / "k8s").mkdir()
    (work / "k8s" / "deploy.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n"
                                              "  name: shop\n")
    (work / "Dockerfile").write_text("FROM python:3.12-slim\n")
    (work / "release.tar.gz").write_text("not really gzip\n")
    (work / "backup-2024.tgz").write_bytes(b"PK\x03\x04 a zip, named as a tarball")
    (work / "restore").mkdir()
    (work / "page.html").write_text("<!DOCTYPE html>\n<html><body>Sign in</body></html>\n")


def clean(text: str, work: Path) -> str:
    text = text.replace(str(work), SHOWN).replace(str(work.resolve()), SHOWN)
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    if len(lines) > HEAD + TAIL:
        lines = [*lines[:HEAD], "...", *lines[-TAIL:]]
    text = "\n".join(lines)
    if len(text) > MAX_CHARS:  # a long line (pip's version list): its two ends
        text = text[:MAX_CHARS // 2 - 2] + " … " + text[-(MAX_CHARS // 2 - 2):]
    return text


def capture(only: str | None = None, skip: set[str] | None = None
            ) -> dict[str, dict[str, str]]:
    work = Path(tempfile.mkdtemp(prefix="hintcap-"))
    servers = []
    try:
        setup(work)
        http_server = http.server.ThreadingHTTPServer(("127.0.0.1", HTTP_PORT), Handler)
        threading.Thread(target=http_server.serve_forever, daemon=True).start()
        servers.append(http_server)
        servers.append(_tls_server(TLS_PORT, work))
        slow = _silent_server(SLOW_PORT)
        out: dict[str, dict[str, str]] = {}
        real_home = Path.home()
        env = {**os.environ, "HOME": str(work / "home"), "LANG": "C.UTF-8", "NO_COLOR": "1",
               "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(real_home / ".rustup")),
               "CARGO_HOME": os.environ.get("CARGO_HOME", str(real_home / ".cargo")),
               "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
               "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com",
               "GIT_TERMINAL_PROMPT": "0", "KUBECONFIG": str(work / "kubeconfig-none"),
               "PGCONNECT_TIMEOUT": "3", "npm_config_update_notifier": "false",
               "npm_config_fund": "false", "npm_config_audit": "false"}
        (work / "home").mkdir()
        for sid, cmd in SCENARIOS.items():
            if (only and sid != only) or sid in (skip or ()):
                continue
            started = time.monotonic()
            try:
                res = subprocess.run(["bash", "-c", cmd], cwd=work, capture_output=True,
                                     env=env, timeout=90)
                text = (res.stdout + res.stderr).decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                print(f"warning: {sid} timed out", file=sys.stderr)
                continue
            text = clean(text, work)
            if not text:
                print(f"warning: {sid} printed nothing", file=sys.stderr)
                continue
            out[sid] = {"command": cmd, "output": text}
            print(f"{sid}: {time.monotonic() - started:.1f}s", file=sys.stderr)
        slow.close()
        return out
    finally:
        for server in servers:
            server.shutdown()
        subprocess.run(["chmod", "-R", "u+w", str(work)], check=False)
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="capture one scenario and print it")
    parser.add_argument("--new", action="store_true",
                        help="run only the scenarios the file does not hold yet")
    parser.add_argument("--again", action="store_true",
                        help="replace the captures already in the file too")
    args = parser.parse_args()
    held = json.loads(OUT.read_text("utf-8")) if OUT.exists() and args.new else {}
    got = capture(args.only, skip=set(held))
    if args.only:
        print(json.dumps(got, indent=2, ensure_ascii=False))
        return 0
    old = json.loads(OUT.read_text("utf-8")) if OUT.exists() else {}
    # what a set was tuned or reported on stays as it was captured: only new scenarios
    # are added, unless --again
    merged = {**old, **got} if args.again else {**got, **old}
    OUT.write_text(json.dumps(dict(sorted(merged.items())), indent=1, ensure_ascii=False)
                   + "\n", "utf-8")
    print(f"{len(got)} captured, {len(merged)} in {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
