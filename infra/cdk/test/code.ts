// Placeholder `cargo lambda build` output for the tests: the code is packaged, not compared.

import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const made: string[] = [];
// The directories go when the test process ends, so runs leave nothing in the temp directory.
process.once('exit', () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

export function codeDirectory(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleetwright-cdk-'));
  made.push(dir);
  for (const fn of ['tick', 'interruption', 'webhook']) {
    fs.mkdirSync(path.join(dir, fn));
    fs.writeFileSync(path.join(dir, fn, 'bootstrap'), '#!/bin/sh\n');
  }
  return dir;
}
