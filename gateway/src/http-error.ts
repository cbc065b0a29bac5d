import type { JsonObject } from '@bufbuild/protobuf';

/** A response the gateway gives itself, before or instead of calling a service. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: { field?: string | null; metadata?: JsonObject; headers?: Record<string, string> } = {},
  ) {
    super(message);
  }
}
