#!/usr/bin/env python3
"""Writes the seed corpus of the HTTP request parser's fuzz target
(fuzz/corpus_http): each seed is two split-seed bytes, then the bytes of one
connection. Run from the repository root: python3 fuzz/make_http_corpus.py"""
import os

SEEDS = {
    'get': b'GET /health HTTP/1.1\r\nHost: x\r\n\r\n',
    'post_length': b'POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"prompt":"Hi"}',
    'chunked_trailers': b'POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n'
                        b'5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n',
    'pipelined': b'GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.0\r\n'
                 b'Connection: keep-alive\r\n\r\n',
    'expect_continue': b'POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc',
    'bare_lf': b'\r\n\nGET /v1/models/a%2Fb?q=1 HTTP/1.1\nA: b\n\n',
    'absolute_form': b'GET http://127.0.0.1:8000/v1/models HTTP/1.1\r\n\r\n',
    'negative_length': b'POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n',
    'lengths_disagree': b'POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3, 4\r\n\r\nabc',
    'no_length': b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n',
    'te_and_cl': b'POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n',
    'te_gzip': b'POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n',
    'big_chunk': b'POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n',
    'many_headers': b'GET / HTTP/1.1\r\n' + b''.join(b'X-%d: v\r\n' % i for i in range(20)) + b'\r\n',
    'obs_fold': b'GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n',
    'http2': b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus_http')
os.makedirs(out, exist_ok=True)
for i, (name, body) in enumerate(sorted(SEEDS.items())):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(bytes([i * 37 % 256, i * 11 % 256]) + body)
