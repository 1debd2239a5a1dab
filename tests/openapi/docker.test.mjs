// Structure checks of docker/Dockerfile, docker/docker-compose.yml and docker/.env.example,
// for a machine without a Docker engine: stages, packages, user, port, healthchecks,
// services, profiles, volumes and environment. Package names are also checked against the
// project's scripts/deps.sh and, where apt-cache answers, against Debian's package lists.
// Run: node --test tests/openapi/docker.test.mjs (after npm ci --prefix tests/openapi).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const YAML = require('yaml');

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCKER = join(ROOT, 'docker');
const read = (...p) => readFileSync(join(...p), 'utf8');

// The shared libraries evald loads at run time, each with the -dev package that builds
// against it (Debian 12 names).
const RUNTIME_LIBS = {
  'libmicrohttpd-dev': 'libmicrohttpd12',
  'libjansson-dev': 'libjansson4',
  'libpq-dev': 'libpq5',
  'libcurl4-openssl-dev': 'libcurl4',
  'libssl-dev': 'libssl3',
  'libpcre2-dev': 'libpcre2-8-0',
  'libunistring-dev': 'libunistring2',
  'libcsv-dev': 'libcsv3',
  'libyaml-dev': 'libyaml-0-2',
  'libjemalloc-dev': 'libjemalloc2',
  'libprotobuf-c-dev': 'libprotobuf-c1',
};

// ---------------------------------------------------------------------- Dockerfile parser
/** Instructions of a Dockerfile as {op, args}, continuation lines joined, comments dropped. */
function parseDockerfile(text) {
  const logical = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (cur === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    if (cur !== '' && line.trim().startsWith('#')) continue; // comment inside a continuation
    if (line.endsWith('\\')) {
      cur += `${line.slice(0, -1)} `;
      continue;
    }
    cur += line;
    logical.push(cur.trim());
    cur = '';
  }
  if (cur !== '') logical.push(cur.trim());
  return logical.map((l) => {
    const m = /^(\S+)\s*(.*)$/.exec(l);
    return { op: m[1].toUpperCase(), args: m[2].replace(/\s+/g, ' ') };
  });
}

/** The stages of a Dockerfile: [{from, name, instructions}]. */
function stages(instructions) {
  const out = [];
  for (const ins of instructions) {
    if (ins.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      out.push({ from: m[1], name: m[2] ?? null, instructions: [] });
    } else {
      assert.ok(out.length > 0, `${ins.op} before FROM`);
      out.at(-1).instructions.push(ins);
    }
  }
  return out;
}

/** Packages of every `apt-get install` in a stage's RUN instructions. */
function aptPackages(stage) {
  const pkgs = [];
  for (const { op, args } of stage.instructions) {
    if (op !== 'RUN') continue;
    for (const cmd of args.split(/&&|;|\|\|/)) {
      const words = cmd.trim().split(/\s+/);
      const i = words.indexOf('install');
      if (words[0] !== 'apt-get' || i < 0) continue;
      pkgs.push(...words.slice(i + 1).filter((w) => w !== '' && !w.startsWith('-')));
    }
  }
  return pkgs;
}

const dockerfile = stages(parseDockerfile(read(DOCKER, 'Dockerfile')));
const buildStage = dockerfile.find((s) => s.name === 'build');
const runtimeStage = dockerfile.at(-1);
const instr = (stage, op) => stage.instructions.filter((i) => i.op === op).map((i) => i.args);

// ------------------------------------------------------------------------ compose parser
const composeDoc = YAML.parseDocument(read(DOCKER, 'docker-compose.yml'), { uniqueKeys: true });
const compose = composeDoc.toJS();

/** docker/.env.example as a Map of its KEY=VALUE lines. */
function parseEnvFile(text) {
  const env = new Map();
  for (const line of text.split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) env.set(m[1], m[2]);
  }
  return env;
}
const envExample = parseEnvFile(read(DOCKER, '.env.example'));

/** Splits `${VAR:-default}` / `${VAR:?message}` into {name, kind, rest}; null otherwise. */
function interpolation(value) {
  const m = /^\$\{([A-Z][A-Z0-9_]*)(?:(:-|:\?)(.*))?\}$/.exec(String(value));
  return m ? { name: m[1], kind: m[2] ?? null, rest: m[3] ?? null } : null;
}

// ================================================================================= tests
test('docker-compose.yml is well-formed YAML with the four services', () => {
  assert.deepEqual(composeDoc.errors, []);
  assert.deepEqual(composeDoc.warnings, []);
  assert.deepEqual(Object.keys(compose.services).sort(), ['config-check', 'evald', 'evald-stub', 'postgres']);
});

test('the Dockerfile has a build and a runtime stage on debian:12-slim', () => {
  assert.equal(dockerfile.length, 2);
  assert.ok(buildStage, 'no stage named build');
  assert.equal(dockerfile[0], buildStage);
  for (const s of dockerfile) assert.equal(s.from, 'debian:12-slim');
  assert.ok(
    instr(runtimeStage, 'COPY').some((a) => /--from=build\b/.test(a) && a.includes('/build/evald')),
    'the runtime stage does not copy evald from the build stage',
  );
});

test('the build stage compiles with CMake in Release', () => {
  const run = instr(buildStage, 'RUN').join(' && ');
  assert.match(run, /cmake -S \. -B (\S+) -DCMAKE_BUILD_TYPE=Release/);
  assert.match(run, /cmake --build \S+ .*--target evald evald-stub evald-cli/);
  const pkgs = aptPackages(buildStage);
  for (const dev of [...Object.keys(RUNTIME_LIBS), 'cmake', 'pkg-config', 'check'])
    assert.ok(pkgs.includes(dev), `build stage does not install ${dev}`);
});

test('the runtime stage installs only the runtime libraries, curl and certificates', () => {
  const pkgs = aptPackages(runtimeStage);
  assert.deepEqual(
    [...pkgs].sort(),
    [...Object.values(RUNTIME_LIBS), 'ca-certificates', 'curl'].sort(),
  );
  assert.ok(!pkgs.some((p) => p.endsWith('-dev')));
  const run = instr(runtimeStage, 'RUN').join(' ');
  assert.match(run, /--no-install-recommends/);
  assert.match(run, /rm -rf \/var\/lib\/apt\/lists/);
});

test('the runtime runs as the non-root user evald on 0.0.0.0:8080 with a readiness check', () => {
  assert.match(instr(runtimeStage, 'RUN').join(' '), /useradd --system .*\bevald$/m);
  assert.deepEqual(instr(runtimeStage, 'USER'), ['evald']);
  assert.deepEqual(instr(runtimeStage, 'EXPOSE'), ['8080']);
  assert.ok(instr(runtimeStage, 'ENV').includes('EVALD_LISTEN=0.0.0.0:8080'));
  const [health] = instr(runtimeStage, 'HEALTHCHECK');
  assert.match(health, /CMD curl -fsS .*http:\/\/127\.0\.0\.1:8080\/readyz/);
  assert.deepEqual(instr(runtimeStage, 'ENTRYPOINT'), ['["evald"]']);
  // USER comes after every RUN: nothing in the image is installed as evald.
  const ops = runtimeStage.instructions.map((i) => i.op);
  assert.ok(ops.lastIndexOf('RUN') < ops.indexOf('USER'));
});

test('every build-stage package is one that scripts/deps.sh installs', (t) => {
  const deps = join(ROOT, 'scripts', 'deps.sh');
  if (!existsSync(deps)) {
    t.skip('SKIPPED: scripts/deps.sh is absent');
    console.log('SKIPPED: build-stage packages vs scripts/deps.sh (scripts/deps.sh is absent)');
    return;
  }
  const words = new Set(
    read(deps)
      .split('\n')
      .map((l) => l.replace(/#.*$/, ''))
      .join(' ')
      .split(/[^A-Za-z0-9+.-]+/),
  );
  const missing = aptPackages(buildStage).filter((p) => !words.has(p));
  assert.deepEqual(missing, [], 'packages the image builds with but scripts/deps.sh does not install');
});

test('every apt package of the Dockerfile exists in Debian', (t) => {
  const pkgs = [...aptPackages(buildStage), ...aptPackages(runtimeStage)];
  // One `apt-cache policy` for all: it prints a `<name>:` block for each package it knows.
  let out = '';
  try {
    out = execFileSync('apt-cache', ['policy', ...pkgs], { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  } catch {
    out = '';
  }
  // Blocks look like "<name>:\n  Installed: …\n  Candidate: <version or (none)>".
  const candidates = new Map();
  let name = null;
  for (const line of out.split('\n')) {
    const head = /^(\S+):$/.exec(line);
    if (head) name = head[1];
    const cand = /^\s+Candidate: (.*)$/.exec(line);
    if (cand && name) candidates.set(name, cand[1]);
  }
  const found = pkgs.filter((p) => candidates.has(p) && candidates.get(p) !== '(none)');
  if (found.length === 0) {
    t.skip('SKIPPED: apt-cache is absent or has no package lists');
    console.log('SKIPPED: Debian package names (apt-cache has no lists here)');
    return;
  }
  assert.deepEqual(pkgs.filter((p) => !found.includes(p)), []);
});

test('compose runs postgres 15 with a named volume and a pg_isready healthcheck', () => {
  const pg = compose.services.postgres;
  assert.match(pg.image, /^postgres:15(-|$)/);
  assert.ok(pg.volumes.includes('pgdata:/var/lib/postgresql/data'));
  assert.ok('pgdata' in compose.volumes, 'pgdata is not declared under volumes');
  assert.equal(pg.healthcheck.test[0], 'CMD-SHELL');
  assert.match(pg.healthcheck.test[1], /^pg_isready -U (\S+) -d (\S+)$/);
  const [, user, db] = /^pg_isready -U (\S+) -d (\S+)$/.exec(pg.healthcheck.test[1]);
  assert.equal(user, pg.environment.POSTGRES_USER);
  assert.equal(db, pg.environment.POSTGRES_DB);
  assert.equal(interpolation(pg.environment.POSTGRES_PASSWORD)?.kind, ':?');
  assert.equal(pg.profiles, undefined);
});

test('compose builds evald from docker/Dockerfile and starts it once postgres is healthy', () => {
  const evald = compose.services.evald;
  assert.equal(evald.profiles, undefined);
  assert.equal(evald.depends_on.postgres.condition, 'service_healthy');
  assert.ok(existsSync(resolve(DOCKER, evald.build.context, evald.build.dockerfile)));
  assert.ok(evald.env_file.includes('.env'));
  const ports = evald.ports.map(String);
  assert.ok(ports.some((p) => p.endsWith(':8080')), 'container port 8080 is not published');
});

test("evald's environment: database URL and token from .env, listening on 0.0.0.0:8080", () => {
  const env = compose.services.evald.environment;
  assert.equal(env.EVALD_LISTEN, '0.0.0.0:8080');
  for (const name of ['EVALD_DATABASE_URL', 'EVALD_API_TOKEN']) {
    const i = interpolation(env[name]);
    assert.equal(i?.name, name, `${name} is not taken from the environment`);
    assert.equal(i.kind, ':?', `${name} must be required (\${${name}:?…})`);
  }
  const listen = instr(runtimeStage, 'ENV').find((e) => e.startsWith('EVALD_LISTEN='));
  assert.equal(listen, `EVALD_LISTEN=${env.EVALD_LISTEN}`);
});

test('the demo profile runs evald-stub, and only .env.example points the providers at it', () => {
  const stub = compose.services['evald-stub'];
  assert.deepEqual(stub.profiles, ['demo']);
  assert.deepEqual(stub.entrypoint, ['evald-stub']);
  const at = stub.command.indexOf('--listen');
  assert.ok(at >= 0, 'evald-stub has no --listen');
  const [, port] = /^0\.0\.0\.0:(\d+)$/.exec(stub.command[at + 1]);
  assert.ok(stub.healthcheck.test.join(' ').includes(`:${port}/`));
  // Without the demo profile evald-stub does not exist: no default of the compose file may
  // name it (every run would fail resolving it while the models read as available).
  const env = compose.services.evald.environment;
  for (const name of ['OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL']) {
    const i = interpolation(env[name]);
    assert.equal(i?.name, name, `${name} is not taken from docker/.env`);
    assert.equal(i.kind, ':-');
    assert.equal(i.rest, '', `${name} defaults to '${i.rest}'; empty keeps evald's default`);
  }
  assert.doesNotMatch(read(DOCKER, 'docker-compose.yml').replace(/^\s*#.*$/gm, ''),
    /\$\{[A-Z_]+:-[^}]*evald-stub/);
  // The demo block of .env.example: the profile and the URLs together, at the stub's port.
  assert.deepEqual(envExample.get('COMPOSE_PROFILES')?.split(','), ['demo']);
  assert.equal(envExample.get('OPENAI_BASE_URL'), `http://evald-stub:${port}/v1`);
  assert.equal(envExample.get('ANTHROPIC_BASE_URL'), `http://evald-stub:${port}`);
});

// The rule of server/config.c: "EVALD_API_TOKEN must be at least N characters".
function evaldTokenMin() {
  const src = read(ROOT, 'server', 'config.c');
  const m = /strlen\(cfg->api_token\) < (\d+)\)[\s\S]{0,200}?"EVALD_API_TOKEN must be at least (\d+) characters"/.exec(src);
  assert.ok(m, "server/config.c's token rule not found");
  assert.equal(m[1], m[2]);
  return Number(m[1]);
}

/** config-check's script as its shell sees it (compose turns $$ into $). */
function configCheckScript() {
  const cc = compose.services['config-check'];
  assert.deepEqual(cc.entrypoint, ['/bin/sh', '-c']);
  assert.equal(cc.command.length, 1);
  return cc.command[0].replaceAll('$$', '$');
}

const runCheck = (env) =>
  spawnSync('/bin/sh', ['-c', configCheckScript()], {
    env: { PATH: process.env.PATH, ...env },
    encoding: 'utf8',
    timeout: 60000,
  });

test('evald starts only after config-check, which runs once', () => {
  const evald = compose.services.evald;
  assert.equal(evald.depends_on['config-check'].condition, 'service_completed_successfully');
  const cc = compose.services['config-check'];
  assert.equal(cc.profiles, undefined);
  assert.equal(cc.image, evald.image, 'config-check must run the evald image');
  assert.equal(String(cc.restart), 'no');
  for (const name of ['EVALD_API_TOKEN', 'OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL'])
    assert.equal(cc.environment[name], evald.environment[name], `config-check sees another ${name}`);
});

test("config-check refuses a token evald would refuse, and accepts one it accepts", () => {
  const min = evaldTokenMin();
  const short = runCheck({ EVALD_API_TOKEN: 'x'.repeat(min - 1) });
  assert.equal(short.status, 2, short.stdout + short.stderr);
  assert.match(short.stdout, new RegExp(`EVALD_API_TOKEN must be at least ${min} characters`));
  const ok = runCheck({ EVALD_API_TOKEN: 'x'.repeat(min) });
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  assert.match(ok.stdout, /config-check: ok/);
});

test('config-check refuses provider URLs at evald-stub when the stub is not running', () => {
  // This machine cannot resolve evald-stub, as a compose network without the demo profile.
  const r = runCheck({ EVALD_API_TOKEN: 'x'.repeat(evaldTokenMin()), OPENAI_BASE_URL: 'http://evald-stub:8090/v1' });
  assert.equal(r.status, 2, r.stdout + r.stderr);
  assert.match(r.stdout, /names evald-stub, which runs only with the demo profile/);
  const real = runCheck({ EVALD_API_TOKEN: 'x'.repeat(evaldTokenMin()), OPENAI_BASE_URL: 'https://api.openai.com/v1' });
  assert.equal(real.status, 0, real.stdout + real.stderr);
});

test('evald --help and --version exit 0 with the environment of the runtime image', (t) => {
  const bin = process.env.EVALD_BIN;
  if (!bin || !existsSync(bin)) {
    t.skip('SKIPPED: EVALD_BIN is not set (ctest sets it)');
    console.log('SKIPPED: evald --help in the image environment (EVALD_BIN is not set)');
    return;
  }
  const env = { PATH: process.env.PATH };
  for (const e of instr(runtimeStage, 'ENV')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(e);
    assert.ok(m, `ENV ${e} is not KEY=value`);
    env[m[1]] = m[2];
  }
  assert.equal(env.EVALD_LISTEN, '0.0.0.0:8080');
  for (const [arg, want] of [['--help', /EVALD_LISTEN/], ['--version', /^evald \d+\.\d+\.\d+\n$/]]) {
    const r = spawnSync(bin, [arg], { env, encoding: 'utf8', timeout: 10000 });
    assert.equal(r.status, 0, `evald ${arg}: ${r.stderr}`);
    assert.match(r.stdout, want);
  }
  // Without --help the same environment is refused, with one log line naming the setting.
  const r = spawnSync(bin, [], { env, encoding: 'utf8', timeout: 10000 });
  assert.equal(r.status, 2);
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, r.stderr);
  const line = JSON.parse(lines[0]);
  assert.equal(line.msg, 'invalid configuration');
  assert.equal(
    line.error,
    'EVALD_LISTEN: refusing to listen on non-loopback address 0.0.0.0 without EVALD_API_TOKEN',
  );
});

test('the compose file works with docker-compose 1.29, and the docs say which Compose', () => {
  // A top-level name: needs Compose v2; docker-compose 1.29 (Debian 12) rejects the file.
  assert.equal(compose.name, undefined);
  assert.equal(envExample.get('COMPOSE_PROJECT_NAME'), 'evald');
  const docs = read(ROOT, 'docs', 'openapi.md');
  assert.match(docs, /Compose v2[^\n]*or[^\n]*docker-compose 1\.29|docker-compose 1\.29[^\n]*or[^\n]*Compose v2/);
});

test("docs/openapi.md's shell lines set every variable they use", () => {
  const docs = read(ROOT, 'docs', 'openapi.md');
  const blocks = [...docs.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.length > 0);
  for (const block of blocks) {
    const set = new Set([...block.matchAll(/(?:^|[\s;(])([A-Za-z_][A-Za-z0-9_]*)=/g)].map((m) => m[1]));
    for (const [, name] of block.matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g))
      assert.ok(set.has(name) || ['EDITOR', 'HOME', 'PATH'].includes(name), `docs/openapi.md uses $${name} without setting it:\n${block}`);
  }
});

test('.env.example defines every required variable, consistently', () => {
  const required = new Set();
  YAML.visit(composeDoc, {
    Scalar(_, node) {
      for (const m of String(node.value).matchAll(/\$\{([A-Z][A-Z0-9_]*):\?/g)) required.add(m[1]);
    },
  });
  assert.ok(required.size >= 3);
  for (const name of required) assert.ok(envExample.has(name), `.env.example lacks ${name}`);
  // No usable token is committed: the user must choose one.
  assert.equal(envExample.get('EVALD_API_TOKEN'), '');
  const pg = compose.services.postgres.environment;
  const url = new URL(envExample.get('EVALD_DATABASE_URL'));
  assert.equal(url.protocol, 'postgresql:');
  assert.equal(url.hostname, 'postgres');
  assert.equal(url.port, '5432');
  assert.equal(url.username, pg.POSTGRES_USER);
  assert.equal(decodeURIComponent(url.password), envExample.get('POSTGRES_PASSWORD'));
  assert.equal(url.pathname, `/${pg.POSTGRES_DB}`);
});

test('docker/.env is ignored by git and by the image build', () => {
  const ignore = read(DOCKER, '.gitignore').split('\n').map((l) => l.trim());
  assert.ok(ignore.includes('.env'));
  const dockerignore = read(DOCKER, 'Dockerfile.dockerignore').split('\n').map((l) => l.trim());
  for (const p of ['docker/.env', '.git', 'build*/', '**/node_modules/'])
    assert.ok(dockerignore.includes(p), `Dockerfile.dockerignore lacks ${p}`);
});
