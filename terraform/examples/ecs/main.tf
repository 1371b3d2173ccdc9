# Strata on ECS Fargate behind an Application Load Balancer, with an RDS Postgres
# Multi-AZ catalog: API keys on.
#
#   docker build -t strata . && docker push ...   (see terraform/README.md)
#   terraform init && terraform apply -var region=eu-west-1 -var bucket_name=... -var image=... \
#     -var vpc_id=... -var 'private_subnet_ids=[...]' -var 'public_subnet_ids=[...]' -var certificate_arn=arn:aws:acm:...
#   STRATA_API_KEY=$(aws secretsmanager get-secret-value --secret-id "$(terraform output -raw api_keys_secret_arn)" \
#     --query SecretString --output text | cut -d, -f1) ../../../deploy/smoke.sh "$(terraform output -raw url)"

resource "aws_security_group" "tasks" {
  name_prefix = "${var.name}-tasks-"
  description = "Strata tasks"
  vpc_id      = var.vpc_id

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_egress_rule" "tasks" {
  security_group_id = aws_security_group.tasks.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  description       = "Catalog, S3, ECR, Secrets Manager, CloudWatch Logs"
}

module "bucket" {
  source     = "../../modules/bucket"
  name       = var.bucket_name
  versioning = var.bucket_versioning
}

module "iam" {
  source     = "../../modules/iam"
  name       = var.name
  bucket_arn = module.bucket.bucket_arn
  prefix     = module.bucket.prefix
}

module "catalog" {
  source                    = "../../modules/catalog"
  name                      = var.name
  engine                    = var.catalog_engine
  vpc_id                    = var.vpc_id
  subnet_ids                = var.private_subnet_ids
  client_security_group_ids = [aws_security_group.tasks.id]
  deletion_protection       = var.deletion_protection
}

module "ecs" {
  source                 = "../../modules/ecs"
  name                   = var.name
  image                  = var.image
  cpu_architecture       = var.cpu_architecture
  vpc_id                 = var.vpc_id
  private_subnet_ids     = var.private_subnet_ids
  public_subnet_ids      = var.public_subnet_ids
  certificate_arn        = var.certificate_arn
  allow_plain_http       = var.allow_plain_http
  allowed_cidrs          = var.allowed_cidrs
  task_security_group_id = aws_security_group.tasks.id
  min_nodes              = var.min_nodes
  max_nodes              = var.max_nodes
  bucket_url             = module.bucket.strata_bucket_url
  catalog_url            = module.catalog.catalog_url
  catalog_secret_arn     = module.catalog.secret_arn
  node_policy_arn        = module.iam.node_policy_arn
  compactor_policy_arn   = module.iam.compactor_policy_arn
  api_key_count          = 1
  kafka                  = var.kafka
  kafka_host             = var.kafka_host
}
