"""Drives hubproxy's S3 API with boto3, unchanged, as Run:ai streamer's
Python side and users' scripts do: the list paginator, head_object, ranged
get_object and download_file's concurrent ranged transfer. Every byte is
compared with the files the Go test wrote to EXPECT_DIR. Prints one JSON
report line; exits non-zero on the first mismatch.

usage: s3_boto3.py ENDPOINT TOKEN EXPECT_DIR WORK_DIR
"""
import json
import os
import sys
import threading

import boto3
from boto3.s3.transfer import TransferConfig
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint, token, expect_dir, work_dir = sys.argv[1:5]
REPO = "org/model/"


def client(access_key):
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                 signature_version=UNSIGNED if access_key is None else "s3v4")
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=access_key or "x", aws_secret_access_key="any-secret", config=cfg)


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def expected(path):
    with open(os.path.join(expect_dir, path), "rb") as f:
        return f.read()


want = {}
for root, _, names in os.walk(expect_dir):
    for n in names:
        p = os.path.relpath(os.path.join(root, n), expect_dir)
        want[REPO + p] = os.path.getsize(os.path.join(root, n))

s3 = client(token)
ranges, threads, lock = [], set(), threading.Lock()


def record(request, **_):
    with lock:
        if request.headers.get("Range"):
            ranges.append(request.headers["Range"])
            threads.add(threading.get_ident())


s3.meta.events.register("before-send.s3.GetObject", record)

# The paginator, two keys a page.
listed, pages = {}, 0
for page in s3.get_paginator("list_objects_v2").paginate(Bucket="models", Prefix=REPO, PaginationConfig={"PageSize": 2}):
    pages += 1
    for o in page.get("Contents", []):
        listed[o["Key"]] = o
if sorted(listed) != sorted(want):
    fail("listed %s, want %s" % (sorted(listed), sorted(want)))
for key, o in listed.items():
    if o["Size"] != want[key]:
        fail("%s: listed size %d, want %d" % (key, o["Size"], want[key]))
    head = s3.head_object(Bucket="models", Key=key)
    if head["ContentLength"] != o["Size"] or head["ETag"] != o["ETag"] or head["LastModified"] != o["LastModified"]:
        fail("%s: head %s/%s/%s, listing %s/%s/%s" % (key, head["ContentLength"], head["ETag"], head["LastModified"],
                                                     o["Size"], o["ETag"], o["LastModified"]))
    body = s3.get_object(Bucket="models", Key=key)["Body"].read()
    if body != expected(key[len(REPO):]):
        fail("%s: get_object bytes differ" % key)

# Ranged get_object.
big = "weights/model-00002-of-00002.safetensors"
data = expected(big)
for first, last in [(0, 0), (100, 1099), (len(data) - 4096, len(data) - 1), (1 << 20, (3 << 20) - 1)]:
    r = s3.get_object(Bucket="models", Key=REPO + big, Range="bytes=%d-%d" % (first, last))
    got = r["Body"].read()
    if got != data[first:last + 1] or r["ContentRange"] != "bytes %d-%d/%d" % (first, last, len(data)):
        fail("range %d-%d: %d bytes, Content-Range %s" % (first, last, len(got), r.get("ContentRange")))
try:
    s3.get_object(Bucket="models", Key=REPO + big, Range="bytes=%d-" % len(data))
    fail("a range past the end was served")
except ClientError as e:
    if e.response["Error"]["Code"] != "InvalidRange":
        fail("range past the end: %s" % e.response["Error"])

# download_file: a HEAD, then concurrent ranged GETs of 1 MiB parts.
ranges.clear()
threads.clear()
dest = os.path.join(work_dir, "download.bin")
s3.download_file("models", REPO + big, dest,
                 Config=TransferConfig(multipart_threshold=1 << 20, multipart_chunksize=1 << 20, max_concurrency=8))
with open(dest, "rb") as f:
    if f.read() != data:
        fail("download_file bytes differ")
transfer_ranges, transfer_threads = len(ranges), len(threads)

# The gated repo: refused to anonymous callers and to a token it did not
# grant, served to the granted one.
gated = "org/gated/model.safetensors"
for who, c in [("anonymous", client(None)), ("denied", client(os.environ["DENIED_TOKEN"]))]:
    try:
        c.get_object(Bucket="models", Key=gated)
        fail("gated repo served to " + who)
    except ClientError as e:
        if e.response["Error"]["Code"] != "AccessDenied":
            fail("gated repo to %s: %s" % (who, e.response["Error"]))
gbody = client(os.environ["GRANTED_TOKEN"]).get_object(Bucket="models", Key=gated)["Body"].read()
if gbody != open(os.path.join(work_dir, "gated.bin"), "rb").read():
    fail("gated repo bytes differ for the granted token")

print(json.dumps({"Listed": len(listed), "Pages": pages, "TransferRanges": transfer_ranges,
                  "TransferThreads": transfer_threads}))
