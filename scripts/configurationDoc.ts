/**
 * Writes docs/configuration.md from the features' settings schemas (`npm run docs:config`). A test
 * fails when the file and the schemas disagree.
 */
import { writeFileSync } from 'node:fs';
import { configurationReference } from '@tdp/server';

const path = new URL('../docs/configuration.md', import.meta.url);
writeFileSync(path, configurationReference());
console.log(`wrote ${path.pathname}`);
