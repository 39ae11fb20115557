/**
 * What each capability takes and gives, so that `defineWorkflow()` can check a step's input mapping at
 * build time. The built-in capabilities of `tdp worker` are listed; add your own by declaration merging,
 * derived from their `defineCapability()` definitions (so a renamed field breaks the workflow using it):
 *
 *   import type { CatalogueOf } from '@tdp/sdk';
 *   import type * as capabilities from './capabilities.ts';
 *
 *   declare module '@tdp/sdk' {
 *     interface CapabilityCatalogue extends CatalogueOf<typeof capabilities> {}
 *   }
 *
 * A capability that is not listed may still be used; its mapping is then only checked by the server.
 */
export interface CapabilityCatalogue {
  'archive.clean': {
    input: {
      /** The source ZIP's resource reference. */
      source: string;
      extraPatterns?: string[];
      defaultJunk?: boolean;
      nameEncoding?: 'auto' | 'utf-8' | 'gbk' | 'shift_jis' | 'big5' | 'cp949' | 'cp437';
      outputPath?: string;
      maxOutputBytes?: number;
    };
    output: {
      /** The cleaned ZIP's resource reference. */
      archive: string;
      nameEncoding: string | null;
      removed: { path: string; reason: string }[];
      keptFiles: number;
      keptBytes: number;
    };
  };
  'image.watermark': {
    input: {
      /** The source ZIP's resource reference. */
      source: string;
      text: string;
      position?: 'center' | 'top-left' | 'top-right' | 'bottom-left' | 'bottom-right';
      opacity?: number;
      size?: number;
      color?: string;
      outputPath?: string;
      maxOutputBytes?: number;
    };
    output: {
      archive: string;
      files: { path: string; status: string; format?: string; reason?: string; message?: string }[];
      watermarked: number;
      failed: number;
      skipped: number;
    };
  };
}

/** The shape every catalogue entry has. */
export interface CapabilityTypes {
  input: object;
  output: unknown;
}

/** What `CatalogueOf` reads of a capability (a `defineCapability()` result of @tdp/worker). */
interface CapabilityShape {
  name: string;
  run(ctx: never, input: never): Promise<unknown>;
}

/**
 * Catalogue entries from capability definitions, keyed by their names: a module's exports
 * (`typeof import('./capabilities.ts')`), an object or an array of them. Anything else among them,
 * and a capability whose name is not a literal, is left out.
 */
export type CatalogueOf<Capabilities> = {
  [C in Capabilities extends readonly unknown[]
    ? Capabilities[number]
    : Capabilities[keyof Capabilities] as C extends CapabilityShape
    ? string extends C['name']
      ? never
      : C['name']
    : never]: C extends CapabilityShape
    ? { input: Parameters<C['run']>[1]; output: Awaited<ReturnType<C['run']>> }
    : never;
};
