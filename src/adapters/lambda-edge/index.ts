export { bundledStoreOptions } from "./bundled.js";
export {
  type CloudFrontHeaders,
  type CloudFrontRequest,
  type CloudFrontRequestEvent,
  type CloudFrontResponse,
  type CloudFrontResponseEvent,
  type CloudFrontResultResponse,
  toCloudFrontHeaders,
} from "./events.js";
export { type EmfOptions, emfRecorder } from "./metrics.js";
export {
  createViewerRequestHandler,
  HANDOVER_HEADER,
  type ViewerRequestHandler,
  type ViewerRequestOptions,
} from "./viewer-request.js";
export { createViewerResponseHandler } from "./viewer-response.js";
