// s3client.mjs drives the real @aws-sdk/client-s3 npm client against
// hubproxy's S3 API and checks every byte it gets back by sha256.
//
// It is started by s3_test.go, which runs a fake hub, a hubproxy in front of
// it and writes the expectations file. Inputs (environment):
//
//   HUBPROXY_S3_URL  base URL of the proxy's S3 listener (path-style endpoint)
//   E2E_S3_EXPECT    path to the expectations JSON (schema: s3Expect in s3_test.go)
//
// Checks: a ListObjectsV2 paginated with a small MaxKeys lists exactly the
// repo's files (keys, sizes) and every page but the last is full; HeadObject
// agrees with the listing (size, ETag); whole and ranged GetObject bytes match;
// a gated repo is AccessDenied (403) to the anonymous caller and to a denied
// token and served to a granted one. One line per check; a non-zero exit
// status on any failure.

import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import {
	GetObjectCommand,
	HeadObjectCommand,
	S3Client,
	paginateListObjectsV2,
} from "@aws-sdk/client-s3";

const endpoint = requireEnv("HUBPROXY_S3_URL").replace(/\/+$/, "");
const expect = JSON.parse(await readFile(requireEnv("E2E_S3_EXPECT"), "utf8"));

function requireEnv(name) {
	const v = process.env[name];
	if (!v) {
		console.error(`FATAL: environment variable ${name} is not set`);
		process.exit(2);
	}
	return v;
}

let failures = 0;
function check(name, ok, detail = "") {
	console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? ": " + detail : ""}`);
	if (!ok) failures++;
}

// client is a path-style S3 client of the proxy: token "" is anonymous (no
// signature at all, as --no-sign-request), else the token is the access key
// id with a secret hubproxy never sees. One attempt, so a refusal is not
// retried into a pass.
function client(token) {
	const opts = { endpoint, region: "us-east-1", forcePathStyle: true, maxAttempts: 1 };
	if (token) {
		opts.credentials = { accessKeyId: token, secretAccessKey: "unused-secret" };
	} else {
		opts.credentials = { accessKeyId: "", secretAccessKey: "" };
		opts.signer = { sign: async (request) => request };
	}
	return new S3Client(opts);
}

const sha256 = (buf) => createHash("sha256").update(buf).digest("hex");

async function body(out) {
	return Buffer.from(await out.Body.transformToByteArray());
}

// refusal is the S3 code and HTTP status of a failed call, or null.
async function refusal(fn) {
	try {
		const out = await fn();
		if (out.Body) await body(out);
		return null;
	} catch (err) {
		return { code: err.name, status: err.$metadata?.httpStatusCode };
	}
}

const anon = client("");
const granted = client(expect.grantedToken);
const denied = client(expect.deniedToken);
const { bucket } = expect;

// ListObjectsV2, paginated.
const listed = [];
let pages = 0;
let shortPage = false;
for await (const page of paginateListObjectsV2({ client: anon, pageSize: expect.maxKeys }, { Bucket: bucket, Prefix: expect.prefix })) {
	const n = (page.Contents ?? []).length;
	if (shortPage) check(`page ${pages} follows a short page`, false, `${n} keys`);
	shortPage = n < expect.maxKeys;
	pages++;
	for (const o of page.Contents ?? []) listed.push({ key: o.Key, size: o.Size, etag: o.ETag });
}
const want = expect.files.map((f) => `${f.key} ${f.size}`).sort();
const got = listed.map((o) => `${o.key} ${o.size}`).sort();
check("ListObjectsV2 lists every file with its size", JSON.stringify(got) === JSON.stringify(want),
	`got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
check("ListObjectsV2 is paginated", pages === Math.max(1, Math.ceil(want.length / expect.maxKeys)), `${pages} pages`);

// HeadObject and whole GetObject of every file.
const etags = new Map(listed.map((o) => [o.key, o.etag]));
for (const f of expect.files) {
	const head = await anon.send(new HeadObjectCommand({ Bucket: bucket, Key: f.key }));
	check(`HeadObject ${f.key}`, head.ContentLength === f.size && head.ETag === etags.get(f.key),
		`length ${head.ContentLength} etag ${head.ETag}, listed ${etags.get(f.key)}`);
	const out = await anon.send(new GetObjectCommand({ Bucket: bucket, Key: f.key }));
	const b = await body(out);
	check(`GetObject ${f.key}`, b.length === f.size && sha256(b) === f.sha256 && out.ETag === etags.get(f.key),
		`${b.length} bytes`);
}

// Ranged GetObject.
for (const r of expect.ranges) {
	const out = await anon.send(new GetObjectCommand({ Bucket: bucket, Key: r.key, Range: `bytes=${r.start}-${r.end}` }));
	const b = await body(out);
	check(`GetObject ${r.key} bytes=${r.start}-${r.end}`,
		out.$metadata.httpStatusCode === 206 && out.ContentRange === `bytes ${r.start}-${r.end}/${r.size}` &&
			b.length === r.end - r.start + 1 && sha256(b) === r.sha256,
		`${out.$metadata.httpStatusCode} ${out.ContentRange}, ${b.length} bytes`);
}

// The gated repo: refused to the anonymous caller and the denied token,
// served to the granted one.
const g = expect.gated;
for (const [who, c] of [["anonymous", anon], ["denied token", denied]]) {
	const e = await refusal(() => c.send(new GetObjectCommand({ Bucket: bucket, Key: g.key })));
	check(`gated GetObject as ${who} is AccessDenied`, e?.code === "AccessDenied" && e?.status === 403, JSON.stringify(e));
	const l = await refusal(() => c.send(new HeadObjectCommand({ Bucket: bucket, Key: g.key })));
	check(`gated HeadObject as ${who} is 403`, l?.status === 403, JSON.stringify(l));
}
{
	const out = await granted.send(new GetObjectCommand({ Bucket: bucket, Key: g.key, Range: "bytes=0-" }));
	const b = await body(out);
	check("gated GetObject as the granted token", b.length === g.size && sha256(b) === g.sha256, `${b.length} bytes`);
}

console.log(failures === 0 ? "s3client: all checks passed" : `s3client: ${failures} checks failed`);
process.exit(failures === 0 ? 0 : 1);
