/** Shared fixtures for tests and benchmarks. */

/** The demo workflow of source document 000: clean a ZIP, then watermark its images. */
export function zipWorkflow(name = 'zip-clean-watermark', version = '1') {
  return {
    name,
    version,
    inputSchema: {
      type: 'object',
      required: ['sourceZip'],
      properties: {
        sourceZip: { type: 'string', minLength: 1 },
        watermarkText: { type: 'string', maxLength: 100 },
      },
      additionalProperties: false,
    },
    steps: [
      {
        key: 'clean',
        capability: 'archive.clean',
        capabilityVersion: '1',
        inputMapping: { source: '$.input.sourceZip' },
      },
      {
        key: 'watermark',
        capability: 'image.watermark',
        capabilityVersion: '2',
        dependsOn: ['clean'],
        inputMapping: { archive: '$.steps.clean.output.archive', text: '$.input.watermarkText' },
      },
    ],
  };
}
