variable "name" {
  description = "Name prefix of the functions and their resources."
  type        = string
}

variable "package_file" {
  description = "Path of the deployment zip holding the strata binary named bootstrap (deploy/build-lambda.sh builds it)."
  type        = string
}

variable "architecture" {
  description = "Instruction set the package was built for: arm64 (Graviton, cheaper per GB-second) or x86_64."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be arm64 or x86_64."
  }
}

variable "memory_mb" {
  description = "Memory of the API function in MB; Lambda gives CPU in proportion (1769 MB is one vCPU)."
  type        = number
  default     = 1024
}

variable "timeout_seconds" {
  description = "Timeout of the API function. API Gateway's HTTP API gives up after 30 s, and Strata caps long-polls at 20 s."
  type        = number
  default     = 29
}

variable "reserved_concurrency" {
  description = "Reserved concurrency of the API function: at most this many sandboxes run, which bounds the cost of a flood and the catalog connections (each sandbox holds at most 2, so 25 hold 50 through RDS Proxy). -1 leaves it unbounded (not recommended)."
  type        = number
  default     = 25

  validation {
    condition     = var.reserved_concurrency == -1 || var.reserved_concurrency >= 1
    error_message = "reserved_concurrency must be at least 1 (0 would stop the function), or -1 for unbounded."
  }
}

variable "api_throttle_rate_limit" {
  description = "With frontend = \"http_api\": steady requests per second API Gateway lets through to the function; beyond it clients get 429."
  type        = number
  default     = 200

  validation {
    condition     = var.api_throttle_rate_limit > 0
    error_message = "api_throttle_rate_limit must be positive."
  }
}

variable "api_throttle_burst_limit" {
  description = "With frontend = \"http_api\": requests API Gateway lets through in a burst above the rate limit."
  type        = number
  default     = 400

  validation {
    condition     = var.api_throttle_burst_limit > 0
    error_message = "api_throttle_burst_limit must be positive."
  }
}

variable "frontend" {
  description = "\"http_api\": API Gateway HTTP API (payload 2.0; buffered: Server-Sent Events answer 406 streaming_unsupported). \"function_url\": a Lambda Function URL (set function_url_streaming for SSE)."
  type        = string
  default     = "http_api"

  validation {
    condition     = contains(["http_api", "function_url"], var.frontend)
    error_message = "frontend must be http_api or function_url."
  }
}

variable "function_url_streaming" {
  description = "With frontend = \"function_url\": use the RESPONSE_STREAM invoke mode, so Server-Sent Events tails stream."
  type        = bool
  default     = false
}

variable "function_url_iam_auth" {
  description = "With frontend = \"function_url\": require SigV4-signed requests (AWS_IAM) in front of Strata's own API keys."
  type        = bool
  default     = false
}

variable "compactor_schedule" {
  description = "EventBridge schedule expression for the compactor function (one compaction pass per event)."
  type        = string
  default     = "rate(5 minutes)"
}

variable "compactor_memory_mb" {
  description = "Memory of the compactor function in MB (it holds one merge's objects and keys)."
  type        = number
  default     = 1024
}

variable "compactor_timeout_seconds" {
  description = "Timeout of the compactor function; a pass is bounded and resumes where it stopped at the next event."
  type        = number
  default     = 300
}

variable "bucket_url" {
  description = "STRATA_BUCKET: s3://bucket/prefix."
  type        = string
}

variable "catalog_url" {
  description = "STRATA_CATALOG without the password: postgres://user@proxy-host:5432/db?sslmode=verify-full&sslrootcert=system (modules/catalog catalog_url; the proxy's endpoint when RDS Proxy is used)."
  type        = string
}

variable "catalog_secret_arn" {
  description = "Secrets Manager secret with the catalog's \"password\" key (modules/catalog secret_arn): the functions read it at start-up into PGPASSWORD, so it never sits in their environment."
  type        = string
}

variable "node_policy_arn" {
  description = "IAM policy of writer and reader nodes (modules/iam node_policy_arn)."
  type        = string
}

variable "compactor_policy_arn" {
  description = "IAM policy of the compactor (modules/iam compactor_policy_arn)."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets the functions run in (they reach the catalog there, and S3 through a gateway endpoint or NAT)."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the functions (allowed in by the catalog)."
  type        = list(string)
}

variable "api_key_count" {
  description = "How many API keys to generate (more than one lets clients move from one to the next). They are kept in Secrets Manager; 0 disables keys (then protect the endpoint another way, e.g. function_url_iam_auth)."
  type        = number
  default     = 1
}

variable "log_retention_days" {
  description = "Days CloudWatch keeps the functions' logs."
  type        = number
  default     = 14
}

variable "extra_environment" {
  description = "More STRATA_* variables for both functions (e.g. STRATA_LOG_LEVEL = \"debug\")."
  type        = map(string)
  default     = {}
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}
