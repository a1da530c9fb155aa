export { bundledStoreOptions, lazyChallenge } from "./bundled.js";
export {
  type CloudFrontHeaders,
  type CloudFrontRequest,
  type CloudFrontRequestEvent,
  type CloudFrontResponse,
  type CloudFrontResponseEvent,
  type CloudFrontResultResponse,
  HANDOVER_HEADER,
  toCloudFrontHeaders,
} from "./events.js";
export { type EmfOptions, emfRecorder } from "./metrics.js";
export {
  type EdgeOverridesOptions,
  type EdgeOverridesStore,
  edgeOverrides,
} from "./overrides.js";
export {
  createViewerRequestHandler,
  type ViewerRequestHandler,
  type ViewerRequestOptions,
} from "./viewer-request.js";
export { createViewerResponseHandler } from "./viewer-response.js";
