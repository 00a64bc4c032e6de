// client.mjs drives the real @huggingface/hub npm client against a running
// hubproxy and checks every byte it gets back by sha256.
//
// It is started by e2e_test.go, which runs a fake hub, a hubproxy in front of
// it, and writes the expectations file. Inputs (environment):
//
//   HUBPROXY_URL  base URL of the proxy, passed to the library as `hubUrl`
//   E2E_EXPECT    path to the expectations JSON (schema: see expect_test.go)
//   E2E_RUN       optional label printed on every line ("run1", "run2")
//
// Every fetch the library makes goes through `guardedFetch`, which refuses to
// leave the proxy's origin: redirects are followed by hand and only when they
// stay on the proxy, so a proxy that hands out an upstream or CDN URL fails
// loudly instead of being silently bypassed (docs/hub-protocol.md §1a, §8.1). It also
// checks the protocol rules a JS client depends on (§2, §5, §6): no Xet headers,
// 206 + exact Content-Range for every Range request.
//
// One line per check; a non-zero exit status on any failure, followed by the
// full request log so the failing exchange can be read from the test output.

import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import assert from "node:assert/strict";
import {
	datasetInfo,
	downloadFile,
	fileDownloadInfo,
	listFiles,
	modelInfo,
	parseSafetensorsMetadata,
} from "@huggingface/hub";

const hubUrl = requireEnv("HUBPROXY_URL").replace(/\/+$/, "");
const expect = JSON.parse(await readFile(requireEnv("E2E_EXPECT"), "utf8"));
const runLabel = process.env.E2E_RUN ?? "run";
const proxyOrigin = new URL(hubUrl).origin;

function requireEnv(name) {
	const v = process.env[name];
	if (!v) {
		console.error(`FATAL: environment variable ${name} is not set`);
		process.exit(2);
	}
	return v;
}

// ---------------------------------------------------------------- fetch guard

/** Every exchange the library made, in order, for the failure dump. */
const requestLog = [];
/** Protocol violations seen by the guard; each one fails the run. */
const violations = [];

const MAX_REDIRECTS = 5;

function headerOf(init, name) {
	const h = new Headers(init?.headers ?? {});
	return h.get(name);
}

/**
 * guardedFetch is the `fetch` handed to every library call. It never contacts
 * a host other than the proxy and records what it sees.
 */
async function guardedFetch(input, init = {}) {
	let url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
	const method = (init.method ?? "GET").toUpperCase();
	const range = headerOf(init, "range");
	for (let hop = 0; ; hop++) {
		const entry = { method, url: url.href, range, status: 0, contentRange: null, contentLength: null };
		requestLog.push(entry);
		if (url.origin !== proxyOrigin) {
			const msg = `request to ${url.href} leaves the proxy (origin ${proxyOrigin})`;
			violations.push(msg);
			throw new Error(`guardedFetch: ${msg}`);
		}
		const resp = await fetch(url, { ...init, redirect: "manual" });
		entry.status = resp.status;
		entry.contentRange = resp.headers.get("content-range");
		entry.contentLength = resp.headers.get("content-length");
		entry.etag = resp.headers.get("x-linked-etag") ?? resp.headers.get("etag");

		if (resp.status >= 300 && resp.status < 400 && resp.headers.has("location")) {
			const next = new URL(resp.headers.get("location"), url);
			entry.location = next.href;
			await resp.body?.cancel();
			if (next.origin !== proxyOrigin) {
				const msg = `${method} ${url.href} was redirected (${resp.status}) off the proxy to ${next.href}`;
				violations.push(msg);
				throw new Error(`guardedFetch: ${msg}`);
			}
			if (hop >= MAX_REDIRECTS) {
				violations.push(`${method} ${url.href}: more than ${MAX_REDIRECTS} redirects`);
				throw new Error("guardedFetch: redirect loop");
			}
			url = next;
			continue;
		}
		inspect(method, url, range, resp);
		return resp;
	}
}

/** inspect records protocol violations that the library itself would not notice. */
function inspect(method, url, range, resp) {
	const where = `${method} ${url.pathname}${url.search}${range ? ` [Range: ${range}]` : ""}`;
	for (const h of ["x-xet-hash", "x-xet-refresh-route", "x-xet-cas-url", "x-xet-access-token"]) {
		if (resp.headers.has(h)) {
			violations.push(`${where}: response carries ${h} (Xet must be stripped, docs/hub-protocol.md §2)`);
		}
	}
	const link = resp.headers.get("link");
	if (link && /xet/i.test(link)) {
		violations.push(`${where}: response Link header mentions xet: ${link}`);
	}
	if ((resp.headers.get("content-type") ?? "").includes("vnd.xet-fileinfo")) {
		violations.push(`${where}: Content-Type is xet-fileinfo (docs/hub-protocol.md §2)`);
	}
	if (link && url.pathname.includes("/tree/")) {
		for (const m of link.matchAll(/<([^>]*)>/g)) {
			if (!/^https?:\/\//.test(m[1]) || new URL(m[1]).origin !== proxyOrigin) {
				violations.push(`${where}: pagination Link ${m[1]} is not an absolute URL on the proxy`);
			}
		}
	}
	if (range && resp.ok) {
		const m = /^bytes=(\d+)-(\d+)$/.exec(range);
		if (resp.status !== 206) {
			violations.push(`${where}: expected 206 for a Range request, got ${resp.status}`);
		} else if (m) {
			const cr = resp.headers.get("content-range") ?? "";
			const got = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(cr);
			if (!got) {
				violations.push(`${where}: 206 with malformed Content-Range ${JSON.stringify(cr)}`);
			} else {
				const [start, end] = [Number(m[1]), Number(m[2])];
				const total = Number(got[3]);
				const wantEnd = Math.min(end, total - 1);
				if (Number(got[1]) !== start || Number(got[2]) !== wantEnd) {
					violations.push(`${where}: Content-Range ${cr} does not match the request`);
				}
				const cl = resp.headers.get("content-length");
				if (cl !== null && Number(cl) !== wantEnd - start + 1) {
					violations.push(`${where}: Content-Length ${cl}, want ${wantEnd - start + 1}`);
				}
			}
		}
	}
}

// ---------------------------------------------------------------- check runner

let failures = 0;
let passes = 0;

async function check(name, fn) {
	const before = violations.length;
	try {
		const detail = await fn();
		if (violations.length > before) {
			throw new Error(`protocol violations:\n    ${violations.slice(before).join("\n    ")}`);
		}
		passes++;
		console.log(`PASS [${runLabel}] ${name}${detail ? ` (${detail})` : ""}`);
	} catch (err) {
		failures++;
		const msg = err instanceof Error ? (err.stack ?? err.message) : String(err);
		console.log(`FAIL [${runLabel}] ${name}: ${msg}`);
	}
}

function sha256(buf) {
	return createHash("sha256").update(new Uint8Array(buf)).digest("hex");
}

/** normEtag strips a weak prefix and quotes, as huggingface_hub does. */
function normEtag(etag) {
	return String(etag).replace(/^W\//, "").replace(/^"|"$/g, "");
}

const common = { hubUrl, fetch: guardedFetch };

// ---------------------------------------------------------------- checks

for (const repo of expect.repos) {
	const files = repo.files;
	const byPath = new Map(files.map((f) => [f.path, f]));
	const isModel = repo.type === "model";
	// What the library calls a repo designation, plus the revision, for every call.
	const on = {
		...common,
		repo: isModel ? repo.id : { type: repo.type, name: repo.id },
		...(repo.revision && { revision: repo.revision }),
	};
	const label = `${isModel ? "" : `${repo.type}s/`}${repo.id}${repo.revision ? `@${repo.revision}` : ""}`;

	await check(`${label}: ${isModel ? "modelInfo" : "datasetInfo"}`, async () => {
		const params = { ...common, name: repo.id, ...(repo.revision && { revision: repo.revision }) };
		const info = isModel
			? await modelInfo({ ...params, additionalFields: ["sha", "filePaths"] })
			: await datasetInfo({ ...params, additionalFields: ["sha"] });
		assert.equal(info.name, repo.id, "name");
		assert.equal(info.sha, repo.commit, "sha must be the resolved commit");
		if (isModel) {
			assert.deepEqual([...info.filePaths].sort(), files.map((f) => f.path).sort(), "filePaths (siblings)");
		}
		return `sha ${info.sha.slice(0, 12)}`;
	});

	await check(`${label}: listFiles recursive (paginated)`, async () => {
		const pagesBefore = requestLog.filter((r) => r.url.includes("/tree/")).length;
		const seen = new Map();
		for await (const entry of listFiles({ ...on, recursive: true })) {
			if (entry.type !== "file") {
				continue;
			}
			assert.ok(!seen.has(entry.path), `duplicate entry ${entry.path}`);
			assert.equal(entry.xetHash, undefined, `${entry.path}: xetHash must be stripped`);
			seen.set(entry.path, entry);
		}
		const pages = requestLog.filter((r) => r.url.includes("/tree/")).length - pagesBefore;
		assert.deepEqual([...seen.keys()].sort(), files.map((f) => f.path).sort(), "listed paths");
		for (const [p, e] of seen) {
			const want = byPath.get(p);
			assert.equal(e.size, want.size, `${p}: size`);
			if (want.lfs) {
				assert.equal(e.lfs?.oid, want.sha256, `${p}: lfs.oid`);
				assert.equal(e.lfs?.size, want.size, `${p}: lfs.size`);
			} else {
				assert.equal(e.lfs, undefined, `${p}: regular file must have no lfs`);
			}
		}
		assert.ok(pages >= repo.minTreePages, `expected at least ${repo.minTreePages} tree pages, the client fetched ${pages}`);
		return `${seen.size} files in ${pages} pages`;
	});

	// Safetensors headers first, while the files are cold: this is the lazy
	// range path (Range 0-0 probe, then 0-7, then the header), not the cache.
	if (repo.safetensors) {
		await check(`${label}: parseSafetensorsMetadata`, async () => {
			const want = repo.safetensors;
			const got = await parseSafetensorsMetadata({ ...on, computeParametersCount: true });
			assert.equal(got.sharded, want.sharded, "sharded");
			const headers = got.sharded ? got.headers : { [want.path]: got.header };
			assert.deepEqual(Object.keys(headers).sort(), Object.keys(want.shards).sort(), "shard files");
			let tensors = 0;
			for (const [file, wantTensors] of Object.entries(want.shards)) {
				const header = headers[file];
				const names = Object.keys(header).filter((k) => k !== "__metadata__");
				assert.deepEqual(names.sort(), Object.keys(wantTensors).sort(), `${file}: tensor names`);
				for (const [name, t] of Object.entries(wantTensors)) {
					assert.equal(header[name].dtype, t.dtype, `${file}:${name} dtype`);
					assert.deepEqual(header[name].shape, t.shape, `${file}:${name} shape`);
					assert.deepEqual(header[name].data_offsets, t.dataOffsets, `${file}:${name} data_offsets`);
				}
				if (want.metadata?.[file]) {
					assert.deepEqual(header.__metadata__, want.metadata[file], `${file}: __metadata__`);
				}
				tensors += names.length;
			}
			if (got.sharded) {
				const shardsInIndex = [...new Set(Object.values(got.index.weight_map ?? {}))].sort();
				assert.deepEqual(shardsInIndex, Object.keys(want.shards).sort(), "index weight_map shards");
			}
			const wantPaths = got.sharded ? [want.path, ...Object.keys(want.shards).sort()] : [want.path];
			assert.deepEqual([got.filepaths[0], ...got.filepaths.slice(1).sort()], wantPaths, "filepaths");
			assert.deepEqual(got.parameterCount, want.parameterCount, "parameterCount by dtype");
			return `${Object.keys(headers).length} file(s), ${tensors} tensors`;
		});
	}

	// Slices next, still before any whole download, so ranges are served from
	// partially filled files.
	for (const s of repo.slices ?? []) {
		await check(`${label}: downloadFile ${s.path} slice [${s.start},${s.end}) sha256`, async () => {
			const blob = await downloadFile({ ...on, path: s.path });
			assert.ok(blob, "downloadFile returned null");
			const buf = await blob.slice(s.start, s.end).arrayBuffer();
			assert.equal(buf.byteLength, s.end - s.start, "slice length");
			assert.equal(sha256(buf), s.sha256, "slice sha256");
			return `${buf.byteLength} bytes`;
		});
	}

	for (const f of files) {
		await check(`${label}: fileDownloadInfo ${f.path}`, async () => {
			const info = await fileDownloadInfo({ ...on, path: f.path });
			assert.ok(info, "fileDownloadInfo returned null (404 EntryNotFound)");
			assert.equal(info.size, f.size, "size");
			assert.equal(normEtag(info.etag), f.etag, "etag");
			assert.equal(info.xet, undefined, "xet info must not be offered");
			assert.equal(new URL(info.url).origin, proxyOrigin, `download url ${info.url} must be on the proxy`);
			return `size ${info.size}, etag ${info.etag}`;
		});

		await check(`${label}: downloadFile ${f.path} (whole, sha256)`, async () => {
			const blob = await downloadFile({ ...on, path: f.path });
			assert.ok(blob, "downloadFile returned null");
			assert.equal(blob.size, f.size, "blob.size");
			const buf = await blob.arrayBuffer();
			assert.equal(buf.byteLength, f.size, "bytes received");
			assert.equal(sha256(buf), f.sha256, "sha256");
			return `${buf.byteLength} bytes`;
		});
	}

	if (files.length > 0) {
		const f = files[0];
		await check(`${label}: downloadFile ${f.path} at revision=<commit>`, async () => {
			const blob = await downloadFile({ ...on, path: f.path, revision: repo.commit });
			assert.ok(blob, "downloadFile returned null");
			assert.equal(sha256(await blob.arrayBuffer()), f.sha256, "sha256");
		});
	}

	await check(`${label}: fileDownloadInfo on a missing file is null`, async () => {
		const info = await fileDownloadInfo({ ...on, path: "does/not/exist.bin" });
		assert.equal(info, null, "want null (404 + X-Error-Code: EntryNotFound)");
	});
}

// ---------------------------------------------------------------- summary

const escaped = requestLog.filter((r) => new URL(r.url).origin !== proxyOrigin);
await check("no request left the proxy", async () => {
	assert.equal(escaped.length, 0, `requests off the proxy: ${escaped.map((r) => r.url).join(", ")}`);
	return `${requestLog.length} requests, all to ${proxyOrigin}`;
});

console.log(`SUMMARY [${runLabel}] ${passes} passed, ${failures} failed, ${requestLog.length} requests`);
if (failures > 0) {
	console.log(`REQUEST LOG [${runLabel}] (method url [range] -> status content-range content-length etag [location])`);
	for (const r of requestLog) {
		console.log(
			`  ${r.method} ${r.url}${r.range ? ` [${r.range}]` : ""} -> ${r.status} ` +
				`cr=${r.contentRange ?? "-"} cl=${r.contentLength ?? "-"} etag=${r.etag ?? "-"}` +
				(r.location ? ` location=${r.location}` : ""),
		);
	}
	process.exit(1);
}
