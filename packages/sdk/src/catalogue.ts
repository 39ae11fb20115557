/**
 * What each capability takes and gives, so that `defineWorkflow()` can check a step's input mapping at
 * build time. The built-in capabilities of `tdp worker` are listed; add your own by declaration merging:
 *
 *   declare module '@tdp/sdk' {
 *     interface CapabilityCatalogue {
 *       'pdf.render': { input: { template: string }; output: { document: string; pages: number } };
 *     }
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
