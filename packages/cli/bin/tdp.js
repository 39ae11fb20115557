#!/usr/bin/env node
// The compiled command (dist/, built by `npm run build` or on `npm pack`).
await import('../dist/main.js');
