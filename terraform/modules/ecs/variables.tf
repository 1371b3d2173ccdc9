variable "name" {
  description = "Name prefix of the cluster, services and their resources."
  type        = string
}

variable "image" {
  description = "Strata container image (built from the repository's Dockerfile), e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/strata:v1.0.0."
  type        = string
}

variable "cpu_architecture" {
  description = "ARM64 (Graviton, about 20% cheaper) or X86_64; the image must be built for it."
  type        = string
  default     = "ARM64"

  validation {
    condition     = contains(["ARM64", "X86_64"], var.cpu_architecture)
    error_message = "cpu_architecture must be ARM64 or X86_64."
  }
}

variable "node_cpu" {
  description = "CPU units of a node task (1024 = one vCPU)."
  type        = number
  default     = 512
}

variable "node_memory_mb" {
  description = "Memory of a node task in MiB; the writer buffer (64 MiB) and the reader cache (--cache-bytes) live here."
  type        = number
  default     = 1024
}

variable "min_nodes" {
  description = "Fewest node tasks (two spread over AZs survive the loss of one)."
  type        = number
  default     = 2
}

variable "max_nodes" {
  description = "Most node tasks autoscaling may run."
  type        = number
  default     = 10
}

variable "cpu_target_percent" {
  description = "Average CPU the autoscaling keeps the nodes at (the JSON path is CPU-bound long before the store is)."
  type        = number
  default     = 60
}

variable "compactor_cpu" {
  description = "CPU units of the compactor task."
  type        = number
  default     = 256
}

variable "compactor_memory_mb" {
  description = "Memory of the compactor task in MiB."
  type        = number
  default     = 1024
}

variable "compactor_count" {
  description = "Compactor tasks; work is leased, so more than one is safe, and one is usually enough."
  type        = number
  default     = 1
}

variable "vpc_id" {
  description = "VPC of the services and the load balancer."
  type        = string
}

variable "private_subnet_ids" {
  description = "Subnets of the tasks; they need a route to S3, ECR, Secrets Manager and CloudWatch Logs (NAT, or VPC endpoints)."
  type        = list(string)
}

variable "public_subnet_ids" {
  description = "Subnets of the internet-facing load balancer (or private ones, with internal = true)."
  type        = list(string)
}

variable "internal" {
  description = "Make the load balancer internal (reachable only inside the VPC)."
  type        = bool
  default     = false
}

variable "allowed_cidrs" {
  description = "CIDR blocks allowed to reach the load balancer."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "certificate_arn" {
  description = "ACM certificate for the HTTPS listener on 443. Required unless allow_plain_http is set."
  type        = string
  default     = null
}

variable "allow_plain_http" {
  description = "Also serve plain HTTP on port 80 (and without certificate_arn, only that). Trials only: API keys and records would cross the network in clear."
  type        = bool
  default     = false
}

variable "task_security_group_id" {
  description = "Security group of the tasks (allowed in by the catalog); the module lets the load balancers reach it on 8080 (and, with kafka, 9092)."
  type        = string
}

variable "bucket_url" {
  description = "STRATA_BUCKET: s3://bucket/prefix."
  type        = string
}

variable "catalog_url" {
  description = "STRATA_CATALOG without the password: postgres://user@host:5432/db?sslmode=verify-full&sslrootcert=/etc/strata/rds-global-bundle.pem (modules/catalog catalog_url)."
  type        = string
}

variable "catalog_secret_arn" {
  description = "Secrets Manager secret with the catalog's \"password\" key, injected as PGPASSWORD."
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

variable "api_key_count" {
  description = "How many API keys to generate into Secrets Manager (injected as STRATA_API_KEYS); 0 disables keys."
  type        = number
  default     = 1
}

variable "public_metrics" {
  description = "Serve /metrics without an API key (it is not routed by the load balancer's default rule otherwise anyway)."
  type        = bool
  default     = false
}

variable "log_retention_days" {
  description = "Days CloudWatch keeps the tasks' logs."
  type        = number
  default     = 14
}

variable "extra_environment" {
  description = "More STRATA_* variables for every task (e.g. STRATA_CACHE_BYTES = \"512MiB\")."
  type        = map(string)
  default     = {}
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}

variable "kafka" {
  description = "Also serve the Kafka protocol: a Network Load Balancer on 9092 forwards to every node's Kafka listener, advertised as every broker's address (shared-address mode). TLS at the balancer with certificate_arn; plain TCP only with allow_plain_http."
  type        = bool
  default     = false
}

variable "kafka_host" {
  description = "Host name Kafka clients reach the Network Load Balancer at, advertised as every broker's host (--kafka-shared-address); default the balancer's own DNS name. With certificate_arn, use a name the certificate covers (an alias record to the kafka_dns_name output)."
  type        = string
  default     = null
}
