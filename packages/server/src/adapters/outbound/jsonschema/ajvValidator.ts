import type { FieldError } from '@tdp/protocol';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { JsonSchemaValidator } from '../../../core/definitions/ports.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

function toFieldErrors(errors: ErrorObject[] | null | undefined): FieldError[] {
  return (errors ?? []).map((e) => ({
    path: e.instancePath,
    message:
      e.keyword === 'additionalProperties'
        ? `${e.message} "${String((e.params as { additionalProperty?: string }).additionalProperty)}"`
        : (e.message ?? 'is invalid'),
  }));
}

/** JSON Schema draft 2020-12 through Ajv. Compiled validators are kept per immutable schema. */
export class AjvJsonSchemaValidator implements JsonSchemaValidator {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly maxCompiled = 2_000) {
    this.ajv = addFormats(new Ajv2020({ allErrors: true, strict: false, validateSchema: true }));
  }

  checkSchema(schema: Record<string, unknown>): FieldError[] {
    if (!this.ajv.validateSchema(schema)) {
      return toFieldErrors(this.ajv.errors).map((e) => ({ path: e.path, message: `schema ${e.message}` }));
    }
    try {
      this.ajv.compile(schema);
      this.ajv.removeSchema(schema);
      return [];
    } catch (error) {
      return [{ path: '', message: `schema cannot be compiled: ${(error as Error).message}` }];
    }
  }

  validate(cacheKey: string, schema: Record<string, unknown>, value: unknown): FieldError[] {
    let validator = this.compiled.get(cacheKey);
    if (!validator) {
      if (this.compiled.size >= this.maxCompiled) this.compiled.clear();
      validator = this.ajv.compile(schema);
      this.compiled.set(cacheKey, validator);
    }
    return validator(value) ? [] : toFieldErrors(validator.errors);
  }
}
