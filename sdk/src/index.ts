/**
 * The Switchboard SDK: a typed client of the REST API (generated from /v1/openapi.json by
 * `npm run gen`), its errors and the pagination helper.
 */
export {
  type Credentials,
  createSwitchboardClient,
  type DataMethod,
  type Schemas,
  type Session,
  type SuccessData,
  type SwitchboardClient,
  type SwitchboardClientOptions,
} from './client.js';
export { type ErrorBody, type ErrorDetail, isSwitchboardError, SwitchboardError } from './errors.js';
export { type FetchPage, type Page, type Paginated, paginate } from './pagination.js';
export type { components, operations, paths } from './schema.js';
