/**
 * The dashboard's pages as the test servers serve them: built once per run by the global setup into a
 * folder of the tests' own. Not packages/dashboard/dist: `npm start`'s prestart (start.test.ts) builds
 * that again during the run, and vite empties it first, so a page loaded then found no login form.
 */
export const testDashboardDirectory = new URL('../artifacts/dashboard-pages/', import.meta.url).pathname;
