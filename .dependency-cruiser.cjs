/**
 * TDP's dependency rules (docs/architecture.md). `npm run deps` checks them; CI fails on any violation.
 *
 * Inside the server's core, a use case may use the facts kernel, pure domain modules, its own context's
 * files and ports — never another context's use case. Where a context needs another one's effect, it
 * goes through the coordinator's family (core/orchestration/consequences.ts, placement.ts, kinds/map.ts)
 * or a port a feature module wires.
 *
 * Around the core, the server is composed by feature: `features/<name>/` builds its part from what the
 * host gives it, `host/` is what every feature plugs into and knows none of them, and the core and the
 * adapters know neither.
 */
const core = '^packages/server/src/core/';
const server = '^packages/server/src/';
/** The ring that assembles the server: the host, the features and the list of them. */
const ring = `${server}(host/|features/|main\\.ts$)`;

/** Modules of one context that any context may use: pure domain logic (no I/O) and ports. */
const sharedSurfaces = [
  `${core}facts/`, // the kernel
  `${core}shared/`,
  `${core}[^/]+/ports\\.ts$`,
  `${core}orchestration/consequences\\.ts$`,
  // Placement (locking the candidate workers, the selector's choice, the attempt and its command): a
  // create places its roots, the scheduler its requests, through it.
  `${core}orchestration/placement\\.ts$`,
  // The map step's coordinator: the scheduler places its items, the status service and the lease
  // reaper settle them, as they reach the coordinator for steps.
  `${core}orchestration/kinds/map\\.ts$`,
];

/** Pure domain modules: records, rules and decisions; they compute, they never do I/O. */
const domainModules = [
  `${core}facts/(records|writeSet|stateMachine|execution|projections|views|outboxEvents|newRecords|taskFamily|notifications|operatorActor)\\.ts$`,
  `${core}definitions/(dag|patterns|references|stepKinds|mappingGuarantees|scheduleToStart|concurrencyKeys|rateLimits)\\.ts$`,
  `${core}orchestration/(advance|transitionRecords|rerun|kinds/approvalRules|kinds/mapItems)\\.ts$`,
  `${core}workers/(selector|attempts|fairShare)\\.ts$`,
  `${core}identity/(outboundUrl|secretBox|apiKeys|userReach|operatorAccess|ssoRoles)\\.ts$`,
  `${core}outbox/policy\\.ts$`,
  `${core}schedules/firePolicy\\.ts$`,
  `${core}retention/policy\\.ts$`,
  `${core}tasks/correction\\.ts$`,
  `${core}shared/(canonicalJson|errors)\\.ts$`,
];

/** Node built-ins a pure module may use: computation, not I/O. */
const pureBuiltins = '^(node:)?(crypto|util|buffer|assert)$';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, anywhere (type-only imports included).',
      from: { path: '^packages/' },
      to: { circular: true },
    },
    {
      name: 'core-not-to-outer-layers',
      severity: 'error',
      comment: "The core never imports adapters, the host, a feature or the server's entry point.",
      from: { path: core },
      to: { path: [`${server}adapters/`, ring] },
    },
    {
      name: 'adapters-not-to-the-ring',
      severity: 'error',
      comment: 'Adapters translate for the core; they never import the host, a feature or the entry point.',
      from: { path: `${server}adapters/` },
      to: { path: ring },
    },
    {
      name: 'host-imports-no-feature',
      severity: 'error',
      comment:
        'The host is what every feature plugs into: it knows none of them (features add to its provisions).',
      from: { path: `${server}host/` },
      to: { path: [`${server}features/`, `${server}main\\.ts$`] },
    },
    {
      name: 'features-share-types-only',
      severity: 'error',
      comment:
        "A feature uses another feature's values through the host's provisions; it may import its exported types, never its code.",
      from: { path: `${server}features/([^/]+)/` },
      to: {
        path: `${server}features/`,
        pathNot: `${server}features/$1/`,
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'core-not-to-infrastructure',
      severity: 'error',
      comment: 'The core reaches databases, brokers and HTTP only through ports.',
      from: { path: core },
      to: {
        path: 'node_modules/(postgres|fastify|ioredis|nats|undici|ws|better-sqlite3|jose|ajv|@temporalio)/',
      },
    },
    {
      name: 'routes-hold-no-sql',
      severity: 'error',
      comment: 'Inbound adapters (HTTP routes) read and write through ports and use cases, never the driver.',
      from: { path: '^packages/server/src/adapters/inbound/' },
      to: { path: 'node_modules/postgres/' },
    },
    {
      name: 'outbound-adapters-not-to-inbound',
      severity: 'error',
      comment: 'An outbound adapter implements core ports; it never depends on an inbound adapter.',
      from: { path: '^packages/server/src/adapters/outbound/' },
      to: { path: '^packages/server/src/adapters/inbound/' },
    },
    {
      name: 'no-cross-context-use-case',
      severity: 'error',
      comment:
        "A context's module never imports another context's use case: only the kernel, domain modules, ports and the coordinator's family.",
      from: { path: `${core}([^/]+)/` },
      to: {
        path: core,
        pathNot: [`${core}$1/`, ...sharedSurfaces, ...domainModules],
      },
    },
    {
      name: 'facts-kernel-uses-no-context',
      severity: 'error',
      comment: 'The facts kernel is used by every context and uses none (only core/shared).',
      from: { path: `${core}facts/` },
      to: { path: core, pathNot: [`${core}facts/`, `${core}shared/`] },
    },
    {
      name: 'domain-modules-do-no-io',
      severity: 'error',
      comment: 'A pure domain module imports only other pure modules, types, and computation built-ins.',
      from: { path: domainModules },
      to: {
        dependencyTypesNot: ['type-only'],
        pathNot: [...domainModules, '^packages/protocol/', pureBuiltins],
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['/dist/'] },
    tsPreCompilationDeps: true,
    combinedDependencies: false,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['@tdp/source', 'import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.cjs', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
